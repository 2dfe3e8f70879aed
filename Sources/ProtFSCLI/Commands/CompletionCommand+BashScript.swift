extension CompletionCommand {
  /// The bash script's text, in which `bash()` fills in what the command tree gives:
  /// @CLASS_NAMES@ (the protection class names), @VALUE_OPTIONS@ (the options that take a value),
  /// @CHOICES@ (the `case` arms of the options whose values are a fixed set), @VALUES@ (the arms
  /// of the options whose values are paths, classes or bundle ids) and @NODES@ (one arm per command).
  static let bashScript = """
    # bash completion for protfs, made by `protfs completion bash` from its command tree.
    _protfs_device() {
      echo "${device:-${PROTFS_DEVICE:-${XDG_DATA_HOME:-$HOME/.local/share}/protfs/device}}"
    }

    # Paths (compgen -f or -d): after --bundle ID, a relative one inside that app's container.
    _protfs_paths() {
      if [ -n "$bundle" ] && [[ "$cur" != /* ]]; then
        COMPREPLY=($(cd "$(_protfs_device)/Containers/$bundle" 2>/dev/null && compgen "$1" -- "$cur"))
      else
        COMPREPLY=($(compgen "$1" -- "$cur"))
      fi
    }

    _protfs_values() {
      case "$1" in
        directory) _protfs_paths -d ;;
        file) _protfs_paths -f ;;
        protectionClass) COMPREPLY=($(compgen -W "@CLASS_NAMES@" -- "$cur")) ;;
        bundleID)
          local root="$(_protfs_device)"
          local names=""
          [ -d "$root/Containers" ] && names=$(ls "$root/Containers" 2>/dev/null)
          COMPREPLY=($(compgen -W "$names" -- "$cur")) ;;
        *) COMPREPLY=() ;;
      esac
    }

    _protfs() {
      local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"
      local path="protfs" device="" bundle="" i word subcommands flags argument trailing positional=0
      for ((i = 1; i < COMP_CWORD; i++)); do
        word="${COMP_WORDS[i]}"
        if [ "$word" = "--" ]; then
          COMPREPLY=($(compgen -c -- "$cur"))
          return
        fi
        case " @VALUE_OPTIONS@ " in
          *" $word "*)
            [ "$word" = "--device" ] && device="${COMP_WORDS[i+1]}"
            [ "$word" = "--bundle" ] && bundle="${COMP_WORDS[i+1]}"
            i=$((i + 1))
            continue ;;
        esac
        case "$word" in
          -*) continue ;;
        esac
        _protfs_node "$path"
        case " $subcommands " in
          *" $word "*) path="$path $word" ;;
          *) positional=$((positional + 1)) ;;
        esac
      done
      case "$path $prev" in
    @CHOICES@  esac
      case "$prev" in
    @VALUES@  esac
      _protfs_node "$path"
      if [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "$flags" -- "$cur"))
      elif [ -n "$subcommands" ]; then
        COMPREPLY=($(compgen -W "$subcommands" -- "$cur"))
      elif [ "$positional" -eq 0 ] && [ "$argument" != none ]; then
        _protfs_values "$argument"
      else
        _protfs_paths -f
      fi
    }

    _protfs_node() {
      case "$1" in
    @NODES@    *) subcommands="" flags="" argument=none trailing=0 ;;
      esac
    }

    complete -F _protfs protfs

    """
}
