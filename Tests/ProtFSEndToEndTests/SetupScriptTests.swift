import Foundation
import ProtFSTestSupport
import Testing

/// `scripts/setup.sh`: what it installs for a user who builds and runs protfs, and what `--test`
/// adds for the tests, held to the programs the tests run.
@Suite(.timeLimit(.minutes(2))) struct SetupScriptTests {
  /// The packages `scripts/setup.sh ARGUMENTS --list` prints, Debian's and PyPI's (`pypi:NAME`).
  static func listed(_ arguments: [String]) async throws -> Set<String> {
    let listed = try await InstallTests.script("setup.sh", arguments + ["--list"])
    #expect(listed.status == 0 && listed.stderr.isEmpty, "setup.sh \(arguments) --list: \(listed)")
    return Set(listed.stdout.split(separator: "\n").map(String.init))
  }

  /// Every program a test names by its absolute path ("/usr/bin/zsh", "/usr/sbin/nginx"), from the
  /// test sources.
  static func programsTheTestsRun() throws -> Set<String> {
    let tests = RepositoryLayout.packageRoot + "/Tests"
    let pattern = /"((?:\/usr)?\/s?bin\/[A-Za-z0-9._+-]+)"/
    var programs: Set<String> = []
    let walker = FileManager.default.enumerator(atPath: tests)
    while let relative = walker?.nextObject() as? String {
      guard relative.hasSuffix(".swift") else { continue }
      let source = try String(contentsOfFile: tests + "/" + relative, encoding: .utf8)
      for match in source.matches(of: pattern) { programs.insert(String(match.1)) }
    }
    return programs
  }

  /// The names dpkg may know `path` by: with merged /usr, a package ships /bin/zsh or /usr/bin/zsh.
  static func names(_ path: String) -> [String] {
    let resolved = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
    return [path, path.hasPrefix("/usr/") ? String(path.dropFirst(4)) : "/usr" + path, resolved]
  }

  /// The package that ships each of `paths` (by one of its `names`), as `dpkg-query -S` says.
  static func owners(of paths: Set<String>) async throws -> [String: String] {
    let all = paths.flatMap(names)
    let searched = try await Protfs.runProgram("/usr/bin/dpkg-query", ["-S"] + all)
    var byName: [String: String] = [:]
    for line in searched.stdout.split(separator: "\n") where !line.hasPrefix("diversion by ") {
      guard let colon = line.range(of: ": ", options: .backwards) else { continue }
      let package = line[..<colon.lowerBound].split(separator: ",")[0].split(separator: ":")[0]
      byName[String(line[colon.upperBound...])] = String(package).trimmingCharacters(in: .whitespaces)
    }
    var owners: [String: String] = [:]
    for path in paths { owners[path] = names(path).lazy.compactMap { byName[$0] }.first }
    return owners
  }

  /// For each installed package of `packages`: whether it is essential, and what it depends on.
  static func control(of packages: Set<String>) async throws -> [String: (essential: Bool, depends: Set<String>)] {
    let shown = try await Protfs.runProgram(
      "/usr/bin/dpkg-query", ["-W", "-f", "${Package}\t${Essential}\t${Pre-Depends}, ${Depends}\n"] + packages.sorted())
    var control: [String: (essential: Bool, depends: Set<String>)] = [:]
    for line in shown.stdout.split(separator: "\n") {
      let fields = line.split(separator: "\t", omittingEmptySubsequences: false)
      guard fields.count == 3 else { continue }
      let depends = fields[2].split(whereSeparator: { $0 == "," || $0 == "|" }).compactMap {
        $0.split(whereSeparator: { $0 == " " || $0 == ":" || $0 == "(" }).first.map(String.init)
      }
      control[String(fields[0])] = (fields[1] == "yes", Set(depends))
    }
    return control
  }

  @Test func setupInstallsWhatProtfsNeedsAndWithTestWhatTheTestsRun() async throws {
    let base = try await Self.listed([])
    let test = try await Self.listed(["--test"])
    #expect(base.contains("libfuse3-dev") && base.contains("fuse3") && base.contains("libcurl4-openssl-dev"))
    #expect(base.isSubset(of: test), "--test adds to the base list: \(base.subtracting(test))")
    #expect(!base.contains { $0.hasPrefix("pypi:") }, "nothing from PyPI for protfs itself: \(base)")
    #expect(test.contains("pypi:sarif-tools") && test.contains("pypi:junitparser"), "\(test)")

    // Every program a test runs comes from an essential package (on every Debian) or from one that
    // `--test` installs (or one of its dependencies), and from none that the base list installs.
    let programs = try Self.programsTheTestsRun()
    #expect(programs.contains("/usr/sbin/nginx") && programs.contains("/usr/bin/zsh"), "\(programs.sorted())")
    let installed = programs.filter { !$0.hasSuffix("/protfs") }  // where an install puts protfs
    let owners = try await Self.owners(of: installed)
    let control = try await Self.control(of: Set(owners.values).union(test.filter { !$0.hasPrefix("pypi:") }))
    let dependencies = test.reduce(into: Set<String>()) { $0.formUnion(control[$1]?.depends ?? []) }
    for program in installed.sorted() {
      guard let owner = owners[program] else {
        Issue.record("no installed package ships \(program), which a test runs")
        continue
      }
      if control[owner]?.essential == true { continue }
      #expect(
        test.contains(owner) || dependencies.contains(owner),
        "\(program) (\(owner)) is run by a test but is not installed by `setup.sh --test`")
      #expect(!base.contains(owner), "\(program) (\(owner)) is a test's, but `setup.sh` installs it for everyone")
    }
  }

  @Test func setupSaysHowItIsUsed() async throws {
    let help = try await InstallTests.script("setup.sh", ["--help"])
    #expect(help.status == 0 && help.stdout.contains("--test") && help.stderr.isEmpty, "\(help)")
    let unknown = try await InstallTests.script("setup.sh", ["--tests"])
    #expect(
      unknown.status == 64 && unknown.stderr.hasPrefix("Error: unknown argument '--tests'\n")
        && unknown.stderr.contains("See 'scripts/setup.sh --help'"), "\(unknown)")
  }
}
