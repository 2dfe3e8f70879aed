/// The EXAMPLES of every command's help and manual page, by the command's words: each line a
/// command as a user types it, then what it does after `#`. The tests hold every visible command
/// to having some, each naming its own command.
package enum CommandExamples {
  /// The examples of the command `path` (`"protfs app launch"`), or none.
  package static func of(_ path: String) -> [String] { all[path] ?? [] }

  /// The EXAMPLES section as `--help` prints it, or "" when there are none.
  package static func text(_ path: String) -> String {
    let lines = of(path)
    guard !lines.isEmpty else { return "" }
    return "\nEXAMPLES:\n" + lines.map { "  " + $0 + "\n" }.joined()
  }

  static let all: [String: [String]] = [
    "protfs": [
      "protfs init com.example.app                # a device with one app container",
      "protfs lock; protfs status                 # lock it and see what is available",
      "protfs help app launch                     # the help of a command",
    ],
    "protfs init": [
      "protfs init com.example.app",
      "protfs init com.example.app --default-class complete   # as the entitlement would",
      "protfs init com.example.app --entitlements App.entitlements",
      "protfs init com.example.app --json | jq -r .path",
      "protfs init --from-app MyApp.ipa          # bundle id and default class from the app",
    ],
    "protfs inspect": [
      "protfs inspect MyApp.ipa                   # bundle id, entitlements, background modes, implications",
      "protfs inspect build/MyApp.app --json | jq .defaultClassName",
    ],
    "protfs init-cache": [
      "protfs init-cache com.example.app          # nsurlsessiond's Downloads directory, class none"
    ],
    "protfs set-class": [
      "protfs set-class --bundle com.example.app complete Documents/notes.txt   # from any directory",
      "protfs set-class -r none Library/Caches    # inside the container: relative to the current directory",
      "protfs set-class --json complete Documents/*   # what it changed, for a script",
    ],
    "protfs get-class": [
      "protfs get-class --bundle com.example.app Documents/notes.txt",
      "protfs get-class --json Documents/*        # inside the container",
    ],
    "protfs ls": [
      "protfs ls -R --bundle com.example.app      # every item of the container with its class",
      "protfs ls --json --bundle com.example.app Documents",
    ],
    "protfs lock": [
      "protfs lock                                # class B now, class A after 10 s, as a phone",
      "protfs lock --grace 0                      # everything the lock takes, at once",
      "protfs lock --inactive                     # and the user-inactivity expiry of class CX",
      "protfs lock --json | jq .classKeysUntil    # when the grace ends",
    ],
    "protfs unlock": [
      "protfs unlock",
      "protfs unlock --passcode-file passcode.txt",
      "protfs unlock --json | jq '.downloads[].destinationPath'   # the downloads it moved into place",
    ],
    "protfs reboot": ["protfs reboot                              # before first unlock: only class none"],
    "protfs seal": [
      "protfs seal                                # encrypt every file; asks for the passcode if one is set",
      "protfs seal --passcode-file - < code.txt   # the passcode from standard input",
      "protfs seal --json | jq .encrypted         # how many files it encrypted",
    ],
    "protfs erase": [
      "protfs erase                               # asks first: every app, its data, the passcode",
      "protfs erase --force                       # in a script: no question",
    ],
    "protfs doctor": [
      "protfs doctor                              # one line per check, with a fix for each warning",
      "protfs doctor --json | jq -r '.checks[] | select(.level != \"ok\") | .fix'",
    ],
    "protfs status": [
      "protfs status",
      "protfs status --json | jq .protectedDataAvailable",
    ],
    "protfs watch": ["protfs watch                               # one line per lock, unlock and inactivity event"],
    "protfs exec": [
      "protfs exec -- cat Containers/com.example.app/Documents/notes.txt",
      "protfs exec --schedule lock@2s,unlock@5s -- ./my-test",
    ],
    "protfs app": [
      "protfs app launch com.example.app -- ./MyApp &",
      "protfs app background com.example.app; protfs app status",
    ],
    "protfs app launch": [
      "protfs app launch com.example.app -- .build/debug/BackgroundDownloader https://example.com/big.iso",
      "protfs app launch com.example.app --background-time 5s --schedule background@1s -- ./app.sh",
      "protfs app launch com.example.app --info-plist Info.plist --no-mount -- ./MyApp",
      "protfs app launch com.example.app           # the installed app, detached: prints com.example.app: PID",
    ],
    "protfs app prewarm": [
      "protfs app prewarm com.example.app -- .build/debug/MyApp   # held before UIApplicationMain",
      "protfs app prewarm com.example.app -- ./MyApp && protfs app launch com.example.app -- ./MyApp",
    ],
    "protfs app uninstall": [
      "protfs app terminate com.example.app; protfs app uninstall com.example.app   # the app and its data"
    ],
    "protfs app install": [
      "protfs app install com.example.app --info-plist Info.plist -- .build/debug/MyApp",
      "protfs app install com.example.app -- ./app.sh && protfs app launch com.example.app",
      "protfs app install --from-app MyApp.ipa -- .build/debug/MyApp   # the app's own Info.plist",
    ],
    "protfs app background": ["protfs app background com.example.app      # didEnterBackground, then suspended"],
    "protfs app foreground": ["protfs app foreground com.example.app      # willEnterForeground, didBecomeActive"],
    "protfs app fetch": ["protfs app fetch com.example.app           # as Xcode's Simulate Background Fetch"],
    "protfs app terminate": [
      "protfs app terminate com.example.app",
      "protfs app terminate com.example.app --user   # a force-quit: its transfers stop",
    ],
    "protfs app status": [
      "protfs app status",
      "protfs app status com.example.app --json",
    ],
    "protfs app push": [
      "protfs app push com.example.app silent.json  # {\"aps\": {\"content-available\": 1}}: wakes the app",
      "echo '{\"aps\": {\"alert\": \"Hi\"}}' | protfs app push com.example.app -",
    ],
    "protfs app push-completed": [
      "protfs app push-completed newData            # inside the app: the notification is handled"
    ],
    "protfs app refresh": [
      "protfs app refresh com.example.app                 # the app's refresh request, once it is due",
      "protfs app refresh com.example.app com.example.app.refresh --now",
    ],
    "protfs app process": [
      "protfs app process com.example.app com.example.app.cleanup  # a BGProcessingTask, woken or launched"
    ],
    "protfs app expire": [
      "protfs app expire com.example.app com.example.app.cleanup   # its expirationHandler runs"
    ],
    "protfs app requests": [
      "protfs app requests com.example.app",
      "protfs app requests com.example.app --json | jq -r '.[].identifier'",
    ],
    "protfs app bgtask-register": [
      "protfs app bgtask-register com.example.app.refresh   # inside the app, while it launches"
    ],
    "protfs app bgtask-submit": [
      "protfs app bgtask-submit com.example.app.refresh --refresh --earliest 15m",
      "protfs app bgtask-submit com.example.app.cleanup --processing --requires-power",
    ],
    "protfs app bgtask-completed": [
      "protfs app bgtask-completed com.example.app.refresh --success   # inside the app, after bgTaskLaunch"
    ],
    "protfs app bgtask-cancel": [
      "protfs app bgtask-cancel com.example.app.refresh",
      "protfs app bgtask-cancel --all",
    ],
    "protfs app location": [
      "protfs app location com.example.app 48.8584,2.2945     # didUpdateLocations, as simctl location set",
      "protfs app location com.example.app --file route.csv --every 500ms",
    ],
    "protfs app audio": ["protfs app audio play     # inside the app: keeps it running in the background"],
    "protfs app location-updates": [
      "protfs app location-updates background   # inside the app: startUpdatingLocation in the background"
    ],
    "protfs import-backup": [
      "protfs import-backup ~/Backups/00008101-001A2B3C --bundle com.example.app   # one app, with its classes",
      "protfs import-backup backup/ --metadata-only --json | jq '.containers[].unknownClasses'",
    ],
    "protfs app list": [
      "protfs app list                            # the apps on the device, their states and containers",
      "protfs app list --json | jq -r '.[].bundleID'",
    ],
    "protfs app container": [
      "cd \"$(protfs app container com.example.app documents)\"   # as simctl get_app_container",
      "ls \"$(protfs app container com.example.app downloads)\"   # nsurlsessiond's temp files",
    ],
    "protfs app begin-task": ["id=$(protfs app begin-task upload)        # inside the app: a background task"],
    "protfs app end-task": ["protfs app end-task \"$id\"                 # inside the app: the task is done"],
    "protfs app time-remaining": ["protfs app time-remaining                  # inside the app: seconds left"],
    "protfs app fetch-completed": ["protfs app fetch-completed newData          # inside the app: the fetch's result"],
    "protfs app events-handled": [
      "protfs app events-handled com.example.bg   # inside the app: the session's completion handler"
    ],
    "protfs app set-fetch-interval": [
      "protfs app set-fetch-interval 900          # inside the app: fetch at most every 15 minutes",
      "protfs app set-fetch-interval never",
    ],
    "protfs mount": ["mkdir -p /mnt/device && protfs mount /mnt/device"],
    "protfs unmount": ["protfs unmount /mnt/device"],
    "protfs passcode": ["protfs passcode set; protfs passcode remove"],
    "protfs passcode set": ["protfs passcode set --passcode-file new.txt"],
    "protfs passcode remove": ["protfs passcode remove --current-file old.txt"],
    "protfs download": [
      "protfs download --bundle com.example.app https://example.com/report.pdf",
      "protfs download --bundle com.example.app --detach -i urls.txt   # run by the session service",
      "protfs download --detach https://example.com/a.bin   # inside an app: its own session",
      "protfs download --bundle com.example.app --json URL | jq '.tasks[].state'",
    ],
    "protfs upload": [
      "protfs upload --bundle com.example.app --from Documents/report.txt https://example.com/upload",
      "protfs upload --bundle com.example.app -X POST -H 'Content-Type: text/plain' --from a.txt --detach URL",
      "protfs upload --bundle com.example.app --from a.txt --json URL | jq .responseStatus",
    ],
    "protfs tasks": [
      "protfs tasks",
      "protfs tasks --session com.example.app.background --json",
      "protfs tasks --all                         # with the tasks that finished more than a day ago",
    ],
    "protfs tasks resume": ["protfs tasks resume 12"],
    "protfs tasks suspend": ["protfs tasks suspend 12"],
    "protfs tasks cancel": ["protfs tasks cancel 12"],
    "protfs tasks wait": [
      "protfs tasks wait 12 13",
      "protfs tasks wait --session com.example.app.background",
    ],
    "protfs tasks prune": [
      "protfs tasks prune                         # finished tasks older than 7 days",
      "protfs tasks prune --older-than 1d --session com.example.app.background",
      "protfs tasks prune --all --json            # every finished task",
    ],
    "protfs tasks events": ["protfs tasks events --session com.example.app.background --json"],
    "protfs sessions": ["protfs sessions                            # the service's sessions and tasks"],
    "protfs sessions start": ["protfs sessions start --idle-exit 5m"],
    "protfs sessions stop": ["protfs sessions stop"],
    "protfs cache": ["protfs cache du; protfs cache purge --older-than 7d"],
    "protfs cache du": ["protfs cache du com.example.app"],
    "protfs cache ls": ["protfs cache ls com.example.app --json"],
    "protfs cache purge": [
      "protfs cache purge --older-than 7d -n      # what would go",
      "protfs cache purge com.example.app --max-size 100M",
    ],
    "protfs simulate-storage-pressure": ["protfs simulate-storage-pressure --free 1G -n"],
    "protfs audit": [
      "protfs audit",
      "protfs audit --bundle com.example.app --policy strict --format sarif -o audit.sarif",
      "protfs audit fixtures/device --format sarif --sarif-root . -o audit.sarif   # paths relative to the repository",
      "protfs audit --format junit --fail-on warning -o audit.xml   # a failing test case per warning or error",
    ],
    "protfs completion": [
      "protfs completion bash > /etc/bash_completion.d/protfs",
      "source <(protfs completion bash)",
    ],
  ]
}
