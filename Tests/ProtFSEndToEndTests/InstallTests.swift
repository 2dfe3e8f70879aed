import Foundation
import ProtFSTestSupport
import Testing

/// `scripts/install.sh` and `scripts/package.sh`, run as a user runs them, into temporary
/// directories only: what they install runs from anywhere, its manual pages render, its
/// completions load the way each shell loads them, and the package holds the same files.
@Suite(.timeLimit(.minutes(2))) struct InstallTests {
  static let root = RepositoryLayout.packageRoot

  /// Runs `scripts/NAME` with `arguments` and `environment` added.
  static func script(_ name: String, _ arguments: [String], environment: [String: String] = [:]) async throws
    -> RunResult
  {
    try await Protfs.runProgram("/bin/bash", [root + "/scripts/" + name] + arguments, environment: environment)
  }

  /// `PATH` with `directory` first.
  static func path(with directory: String) -> String {
    directory + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
  }

  /// Every regular file below `directory`, relative to it, sorted.
  static func files(below directory: String) -> [String] {
    let walker = FileManager.default.enumerator(atPath: directory)
    var found: [String] = []
    while let relative = walker?.nextObject() as? String {
      var isDirectory: ObjCBool = false
      if FileManager.default.fileExists(atPath: directory + "/" + relative, isDirectory: &isDirectory),
        !isDirectory.boolValue
      {
        found.append(relative)
      }
    }
    return found.sorted()
  }

  /// Renders every page in `directory` with man(1) at 80 columns: none may warn.
  static func expectPagesRenderWithoutWarnings(in directory: String) async throws {
    let commands = try await Protfs.run(["help", "--commands"])
    let pages = try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
    #expect(pages.count == commands.stdout.split(separator: "\n").count, "one page per command: \(pages)")
    #expect(pages.contains { $0.hasPrefix("protfs.1") } && pages.contains { $0.hasPrefix("protfs-app-launch.1") })
    for page in pages {
      let shown = try await Protfs.runProgram(
        "/usr/bin/man", ["-l", directory + "/" + page], environment: ["MANPAGER": "cat", "MANWIDTH": "80"])
      // groff's warnings ("cannot adjust line", "cannot break line") go to standard error.
      #expect(shown.status == 0 && shown.stdout.contains("NAME") && shown.stderr.isEmpty, "\(page): \(shown)")
    }
  }

  @Test func anInstallRunsFromAnywhereWithItsPagesCompletionsAndPolicies() async throws {
    let t = try TestDevice(containers: ["com.example.app"])
    let prefix = t.directory + "/prefix"
    let bin = prefix + "/bin"
    let installed = try await Self.script(
      "install.sh", ["--prefix", prefix, "--binary", Protfs.binary], environment: ["PATH": Self.path(with: bin)])
    let version = try await Protfs.run(["--version"]).output
    #expect(
      installed.status == 0 && installed.stdout == "install.sh: installed \(version) in \(prefix)\n", "\(installed)")
    #expect(installed.stderr.isEmpty, "a reachable prefix on PATH warns of nothing: \(installed)")
    let layout = Self.files(below: prefix)
    for file in [
      "bin/protfs", "share/man/man1/protfs.1", "share/man/man1/protfs-app-begin-task.1",
      "share/bash-completion/completions/protfs", "share/zsh/site-functions/_protfs",
      "share/fish/vendor_completions.d/protfs.fish", "share/protfs/default.policy", "share/protfs/strict.policy",
      "share/protfs/background-downloads.policy", "share/protfs/README.md", "share/doc/protfs/LICENSE",
    ] {
      #expect(layout.contains(file), "\(file) in \(layout)")
    }
    // Again: the same files, nothing added or lost.
    let again = try await Self.script(
      "install.sh", ["--prefix", prefix, "--binary", Protfs.binary], environment: ["PATH": Self.path(with: bin)])
    #expect(again.status == 0 && again.stderr.isEmpty, "\(again)")
    #expect(Self.files(below: prefix) == layout)

    let help = try await Protfs.runProgram(bin + "/protfs", ["--help"], currentDirectory: "/")
    #expect(help.status == 0 && help.stdout.hasPrefix("OVERVIEW: "), "\(help)")
    // An installed policy by name, from a directory with no Policies/ in it.
    let audit = try await Protfs.runProgram(
      bin + "/protfs", ["--device", t.root, "audit", "--policy", "strict", "--format", "json"], currentDirectory: "/")
    #expect(audit.status == 1 && audit.stdout.contains("\"ruleId\": \"ST004\""), "\(audit)")

    try await Self.expectPagesRenderWithoutWarnings(in: prefix + "/share/man/man1")
    // man finds the pages from PATH alone (share/man beside bin), as for any prefix.
    let byName = try await Protfs.runProgram(
      "/usr/bin/man", ["protfs-app-launch"],
      environment: ["PATH": Self.path(with: bin), "MANPAGER": "cat", "MANWIDTH": "80"])
    #expect(byName.status == 0 && byName.stdout.contains("protfs-app-launch"), "\(byName)")

    let uninstalled = try await Self.script("install.sh", ["--prefix", prefix, "--uninstall"])
    #expect(uninstalled.status == 0 && uninstalled.stdout == "install.sh: removed protfs from \(prefix)\n")
    // The install made the prefix and every directory in it: none is left behind, empty.
    #expect(!FileManager.default.fileExists(atPath: prefix), "\(Self.files(below: t.directory))")
    let nothing = try await Self.script("install.sh", ["--prefix", prefix, "--uninstall"])
    #expect(
      nothing.status == 0 && nothing.stdout == "install.sh: nothing to remove: no protfs is installed in \(prefix)\n",
      "\(nothing)")
    #expect(!FileManager.default.fileExists(atPath: prefix))
  }

  @Test func anUninstallRemovesOnlyTheDirectoriesTheInstallMade() async throws {
    let t = try TestDevice(containers: [])
    // A prefix as /usr/local is: bin and share/man there before, empty, and a page of another tool.
    let prefix = t.directory + "/local"
    for directory in ["bin", "share/man/man1", "share/doc"] {
      try FileManager.default.createDirectory(
        atPath: prefix + "/" + directory, withIntermediateDirectories: true)
    }
    try Data("other".utf8).write(to: URL(fileURLWithPath: prefix + "/share/man/man1/other.1"))
    let installed = try await Self.script("install.sh", ["--prefix", prefix, "--binary", Protfs.binary])
    #expect(installed.status == 0, "\(installed)")
    // Installed again (an upgrade): the directories the first install made are still its own.
    let upgraded = try await Self.script("install.sh", ["--prefix", prefix, "--binary", Protfs.binary])
    #expect(upgraded.status == 0, "\(upgraded)")
    let uninstalled = try await Self.script("install.sh", ["--prefix", prefix, "--uninstall"])
    #expect(uninstalled.status == 0 && uninstalled.stdout == "install.sh: removed protfs from \(prefix)\n")
    var left: [String] = []
    let walker = FileManager.default.enumerator(atPath: prefix)
    while let relative = walker?.nextObject() as? String { left.append(relative) }
    #expect(
      left.sorted() == ["bin", "share", "share/doc", "share/man", "share/man/man1", "share/man/man1/other.1"],
      "\(left.sorted())")
  }

  @Test func underTheUsrPrefixTheZshCompletionGoesWhereDebiansZshLooks() async throws {
    let t = try TestDevice(containers: [])
    let stage = t.directory + "/stage"
    let staged = try await Self.script(
      "install.sh", ["--destdir", stage, "--prefix", "/usr", "--binary", Protfs.binary])
    #expect(staged.status == 0, "\(staged)")
    let files = Self.files(below: stage)
    #expect(files.contains("usr/share/zsh/vendor-completions/_protfs"), "\(files)")
    #expect(!files.contains { $0.hasPrefix("usr/share/zsh/site-functions") }, "\(files)")
    #expect(!files.contains { $0.hasPrefix("usr/share/protfs/.") }, "no install record in a package: \(files)")
    // zsh's own fpath, before any startup file: Debian's zsh reads /usr/share/zsh/vendor-completions,
    // and /usr/local/share/zsh/site-functions for the default prefix.
    let fpath = try await Protfs.runProgram("/usr/bin/zsh", ["-f", "-c", "print -l $fpath"])
    let directories = fpath.stdout.split(separator: "\n")
    #expect(
      directories.contains("/usr/share/zsh/vendor-completions")
        && directories.contains("/usr/local/share/zsh/site-functions")
        && !directories.contains("/usr/share/zsh/site-functions"), "\(fpath)")
  }

  @Test func eachShellLoadsTheInstalledCompletionAsItLoadsAnyOther() async throws {
    let t = try TestDevice(containers: [])
    let prefix = t.directory + "/prefix"
    let installed = try await Self.script("install.sh", ["--prefix", prefix, "--binary", Protfs.binary])
    #expect(installed.status == 0, "\(installed)")
    // bash-completion finds a command's completion in $XDG_DATA_DIRS/bash-completion/completions
    // the first time the command is completed (/usr/local/share and /usr/share by default).
    let environment = [
      "PATH": Self.path(with: prefix + "/bin"), "XDG_DATA_DIRS": prefix + "/share:/usr/share",
      "HOME": t.directory, "XDG_CONFIG_HOME": t.directory + "/config", "XDG_DATA_HOME": t.directory + "/data",
    ]
    let bash = try await Protfs.runProgram(
      "/bin/bash",
      [
        "--norc", "-c",
        """
        source /usr/share/bash-completion/bash_completion
        __load_completion protfs && complete -p protfs
        COMP_WORDS=(protfs app la); COMP_CWORD=2; COMPREPLY=(); _protfs; echo "${COMPREPLY[*]}"
        """,
      ], environment: environment)
    #expect(bash.status == 0 && bash.stdout == "complete -F _protfs protfs\nlaunch\n", "\(bash)")

    // fish reads vendor_completions.d of every $XDG_DATA_DIRS entry.
    let fish = try await Protfs.runProgram(
      "/usr/bin/fish", ["-c", "complete -C 'protfs app la'"], environment: environment)
    #expect(fish.status == 0 && fish.stdout.hasPrefix("launch\tRun a program as the app"), "\(fish)")

    // zsh's compinit autoloads _protfs from $fpath; the first Tab must complete (in a terminal:
    // compinit's completion runs only in zle, which zsh's zpty gives a script).
    let zsh = """
      zmodload zsh/zpty
      zpty z zsh -f -i
      zpty -w z "PS1='> '; fpath=('\(prefix)/share/zsh/site-functions' \\$fpath); autoload -U compinit; \
      compinit -u -d '\(t.directory)/zcompdump'; print \\${:-compinit}-done"
      zpty -w -n z $'protfs app la\\t'
      seen=""
      for i in {1..400}; do
        while zpty -r -t z chunk; do seen+=$chunk; done
        [[ $seen == *compinit-done*launch* ]] && break
        sleep 0.05
      done
      zpty -d z
      [[ $seen == *compinit-done*launch* ]] && print completed || print -r -- "not completed: $seen"
      """
    let tab = try await Protfs.runProgram("/usr/bin/zsh", ["-f", "-c", zsh], environment: environment)
    #expect(tab.status == 0 && tab.stdout == "completed\n", "\(tab)")
  }

  @Test func theInstallWarnsWhenTheAppUserCannotReachTheBinaryOrFindItByName() async throws {
    let t = try TestDevice(containers: [])
    let closed = t.directory + "/closed"
    try FileManager.default.createDirectory(atPath: closed, withIntermediateDirectories: false)
    chmod(closed, 0o700)
    let prefix = closed + "/prefix"
    let installed = try await Self.script(
      "install.sh", ["--prefix", prefix, "--binary", Protfs.binary], environment: ["PATH": "/usr/bin:/bin"])
    #expect(installed.status == 0, "\(installed)")
    #expect(
      installed.stderr.contains(
        "install.sh: warning: '\(closed)' does not let other users through (mode 700), so apps (uid 501) cannot run"
      ), "\(installed)")
    #expect(installed.stderr.contains("warning: '\(prefix)/bin' is not on PATH"), "\(installed)")
    // The warning is true: the app user cannot run it. (Through a shell: setpriv's own exec still
    // holds root's capabilities, which pass any directory.)
    let asApp = try await Protfs.runProgram(
      "/usr/bin/setpriv",
      [
        "--reuid", "501", "--regid", "501", "--clear-groups", "/bin/sh", "-c", "\"$0\" --version",
        prefix + "/bin/protfs",
      ])
    #expect(asApp.status != 0, "\(asApp)")
  }

  @Test func theScriptsSayHowTheyAreUsedAndWhatIsMissing() async throws {
    let help = try await Self.script("install.sh", ["--help"])
    #expect(help.status == 0 && help.stdout.hasPrefix("OVERVIEW: ") && help.stdout.contains("uid 501"), "\(help)")
    let missing = try await Self.script(
      "install.sh", ["--prefix", "/nonexistent/prefix", "--binary", "/nonexistent/protfs"])
    #expect(
      missing.status == 1
        && missing.stderr
          == "Error: no protfs binary at '/nonexistent/protfs'; run `bash scripts/build.sh` first, or give one with --binary FILE.\n",
      "\(missing)")
    #expect(!FileManager.default.fileExists(atPath: "/nonexistent/prefix"))
    let unknown = try await Self.script("install.sh", ["--prefx", "/tmp"])
    #expect(
      unknown.status == 64 && unknown.stderr.hasPrefix("Error: unknown argument '--prefx'\n")
        && unknown.stderr.contains("See 'scripts/install.sh --help'"), "\(unknown)")
    let relative = try await Self.script("install.sh", ["--prefix", "usr"])
    #expect(relative.status == 64 && relative.stderr.contains("absolute path"), "\(relative)")
    let packageHelp = try await Self.script("package.sh", ["--help"])
    #expect(packageHelp.status == 0 && packageHelp.stdout.contains("--toolchain-runtime"), "\(packageHelp)")
  }
}

/// `scripts/package.sh`, run as a user runs it: the Debian package holds what `install.sh`
/// installs, says what it needs, and runs unpacked.
///
/// A suite of its own for its time limit: packaging compresses the binary with xz (about 7 s of one
/// core), and the test takes 16-17 s on a quiet machine, 37-40 s beside four busy loops on two
/// cores, and failed the install tests' 2 minutes in a fresh clone at a load of 9-12. Five minutes
/// is several times what it needs with both cores busy.
@Suite(.timeLimit(.minutes(5))) struct PackageTests {
  @Test func thePackageHoldsTheBinaryPagesCompletionsAndPoliciesAndSaysWhatItNeeds() async throws {
    let t = try TestDevice(containers: ["com.example.app"])
    let output = t.directory + "/out"
    let version = try await Protfs.run(["--version"]).output.replacingOccurrences(of: "protfs ", with: "")
    // The debug build loads the Swift runtime from the toolchain, which no Debian package
    // provides: packaging it must be asked for (the release build links the runtime in).
    let linked = try await Protfs.runProgram("/usr/bin/ldd", [Protfs.binary])
    if linked.stdout.contains("libswiftCore.so") {
      let refused = try await InstallTests.script("package.sh", ["--binary", Protfs.binary, "--output", output])
      #expect(refused.status == 1 && refused.stderr.contains("libraries no Debian package provides"), "\(refused)")
    }
    let packaged = try await InstallTests.script(
      "package.sh", ["--binary", Protfs.binary, "--output", output, "--toolchain-runtime"],
      environment: ["DEBEMAIL": "", "DEBFULLNAME": ""])
    let arch = try await Protfs.runProgram("/usr/bin/dpkg", ["--print-architecture"]).output
    let deb = output + "/protfs_\(version)_\(arch).deb"
    #expect(packaged.status == 0 && packaged.stdout == deb + "\n", "\(packaged)")

    let info = try await Protfs.runProgram("/usr/bin/dpkg-deb", ["--info", deb])
    #expect(info.status == 0 && info.stdout.contains(" Package: protfs\n"), "\(info)")
    #expect(info.stdout.contains(" Version: \(version)\n") && info.stdout.contains(" Architecture: \(arch)\n"))
    // Whoever builds it, by Debian's variables; without them, a local build's name.
    #expect(info.stdout.contains(" Maintainer: protfs developers <protfs@developers.invalid>\n"), "\(info)")
    let dependsLine = info.stdout.split(separator: "\n").first { $0.hasPrefix(" Depends: ") } ?? ""
    let depends = dependsLine.dropFirst(" Depends: ".count).split(separator: ",").map {
      String($0.trimmingCharacters(in: .whitespaces).prefix { $0 != " " })
    }
    // What the binary links (libfuse3-3 or -4 as the release names it), the libcurl and libcrypto
    // (libssl3 or libssl3t64) it loads, and fusermount3.
    for needed in ["libattr1", "libc6", "libsqlite3-0", "libssl3", "libfuse3-", "libcurl4", "fuse3"] {
      #expect(depends.contains { $0.hasPrefix(needed) }, "\(needed) in \(depends)")
    }

    let contents = try await Protfs.runProgram("/usr/bin/dpkg-deb", ["--contents", deb])
    #expect(contents.status == 0, "\(contents)")
    let entries = contents.stdout.split(separator: "\n")
    #expect(entries.allSatisfy { $0.contains(" root/root ") }, "\(contents.stdout)")
    let paths = Set(entries.compactMap { $0.split(separator: " ").last.map(String.init) })
    for path in [
      "./usr/bin/protfs", "./usr/share/man/man1/protfs.1.gz", "./usr/share/man/man1/protfs-app-launch.1.gz",
      "./usr/share/bash-completion/completions/protfs", "./usr/share/zsh/vendor-completions/_protfs",
      "./usr/share/fish/vendor_completions.d/protfs.fish", "./usr/share/protfs/default.policy",
      "./usr/share/protfs/strict.policy", "./usr/share/protfs/background-downloads.policy",
      "./usr/share/doc/protfs/copyright", "./usr/share/doc/protfs/changelog.gz",
    ] {
      #expect(paths.contains(path), "\(path) in the package")
    }

    // Lintian, as Debian checks a package: no error and no warning. The debug build's RUNPATH to
    // the toolchain's runtime is what --toolchain-runtime asks for; a release build has none.
    var lintianArguments = ["--display-level", ">=warning", "--fail-on", "error,warning"]
    if linked.stdout.contains("libswiftCore.so") {
      lintianArguments += ["--suppress-tags", "custom-library-search-path"]
    }
    let lintian = try await Protfs.runProgram("/usr/bin/lintian", lintianArguments + [deb])
    let findings = lintian.stdout.split(separator: "\n").filter { $0.hasPrefix("E: ") || $0.hasPrefix("W: ") }
    #expect(lintian.status == 0 && findings.isEmpty, "\(lintian)")
    let changelog = try await Protfs.runProgram(
      "/bin/sh", ["-c", "dpkg-deb --fsys-tarfile \"$0\" | tar -xO ./usr/share/doc/protfs/changelog.gz | gzip -dc", deb])
    #expect(
      changelog.status == 0 && changelog.stdout.hasPrefix("protfs (\(version)) unstable; urgency=medium\n")
        && changelog.stdout.contains("\n -- protfs developers <protfs@developers.invalid>  "), "\(changelog)")

    // $DEBEMAIL and $DEBFULLNAME name the maintainer, as dch reads them.
    let named = try await InstallTests.script(
      "package.sh", ["--binary", Protfs.binary, "--output", t.directory + "/named", "--toolchain-runtime"],
      environment: ["DEBEMAIL": "jane@example.org", "DEBFULLNAME": "Jane Doe"])
    #expect(named.status == 0, "\(named)")
    let namedInfo = try await Protfs.runProgram(
      "/usr/bin/dpkg-deb", ["--field", named.stdout.trimmingCharacters(in: .newlines), "Maintainer"])
    #expect(namedInfo.stdout == "Jane Doe <jane@example.org>\n", "\(namedInfo)")

    // Unpacked, the binary runs, finds its policies in usr/share/protfs and its pages render.
    let unpacked = t.directory + "/unpacked"
    let extracted = try await Protfs.runProgram("/usr/bin/dpkg", ["-x", deb, unpacked])
    #expect(extracted.status == 0, "\(extracted)")
    let binary = unpacked + "/usr/bin/protfs"
    let shown = try await Protfs.runProgram(binary, ["--version"], currentDirectory: "/")
    #expect(shown.status == 0 && shown.output == "protfs \(version)", "\(shown)")
    let audit = try await Protfs.runProgram(
      binary,
      ["--device", t.root, "audit", "--policy", "background-downloads", "--policy", "strict", "--format", "json"],
      currentDirectory: "/")
    #expect(audit.status == 1 && audit.stdout.contains("\"ruleId\": \"ST004\""), "\(audit)")
    // The pages are the ones install.sh writes (whose rendering InstallTests checks, page by
    // page), compressed as Debian wants them; man reads the compressed form.
    let written = t.directory + "/pages"
    let made = try await InstallTests.script("man.sh", [written, Protfs.binary])
    #expect(made.status == 0, "\(made)")
    let packagedPages = try FileManager.default.contentsOfDirectory(atPath: unpacked + "/usr/share/man/man1").sorted()
    let writtenPages = try FileManager.default.contentsOfDirectory(atPath: written).sorted()
    #expect(packagedPages == writtenPages.map { $0 + ".gz" } && packagedPages.count > 60, "\(packagedPages)")
    for page in writtenPages {
      let unzipped = try await Protfs.runProgram(
        "/bin/gzip", ["-dc", unpacked + "/usr/share/man/man1/" + page + ".gz"])
      let expected = try String(contentsOfFile: written + "/" + page, encoding: .utf8)
      #expect(unzipped.status == 0 && unzipped.stdout == expected, "\(page)")
    }
    let page = try await Protfs.runProgram(
      "/usr/bin/man", ["-l", unpacked + "/usr/share/man/man1/protfs-app-launch.1.gz"],
      environment: ["MANPAGER": "cat", "MANWIDTH": "80"])
    #expect(page.status == 0 && page.stdout.contains("NAME") && page.stderr.isEmpty, "\(page)")
  }
}
