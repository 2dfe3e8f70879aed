import Foundation
import ProtFSAudit
import ProtFSSystem
import Testing

@testable import ProtFS

@Suite struct ProtectionClassTests {
  static let spellings: [(String, ProtectionClass)] = [
    ("none", .none), ("NONE", .none), ("NSFileProtectionNone", .none), ("nsfileprotectionnone", .none),
    ("complete", .complete), ("NSFileProtectionComplete", .complete), ("Complete", .complete),
    ("complete-unless-open", .completeUnlessOpen), ("unless-open", .completeUnlessOpen),
    ("NSFileProtectionCompleteUnlessOpen", .completeUnlessOpen), ("completeUnlessOpen", .completeUnlessOpen),
    ("complete-until-first-user-authentication", .completeUntilFirstUserAuthentication),
    ("until-first-auth", .completeUntilFirstUserAuthentication),
    ("UNTIL-FIRST-AUTH", .completeUntilFirstUserAuthentication),
    ("NSFileProtectionCompleteUntilFirstUserAuthentication", .completeUntilFirstUserAuthentication),
    ("completeUntilFirstUserAuthentication", .completeUntilFirstUserAuthentication),
    ("complete-when-user-inactive", .completeWhenUserInactive), ("when-inactive", .completeWhenUserInactive),
    ("NSFileProtectionCompleteWhenUserInactive", .completeWhenUserInactive),
    ("completeWhenUserInactive", .completeWhenUserInactive), ("inactive", .completeWhenUserInactive),
  ]

  @Test(arguments: spellings)
  func parsesEverySpelling(text: String, expected: ProtectionClass) throws {
    #expect(ProtectionClass(parsing: text) == expected)
    #expect(try ProtectionClass.parse(text) == expected)
  }

  @Test func unknownNameSuggestsTheNearest() {
    #expect(ProtectionClass(parsing: "compelte") == nil)
    #expect {
      try ProtectionClass.parse("compelte")
    } throws: { error in
      let description = (error as! ProtFSError).description
      return description.contains("'compelte' is not a protection class")
        && description.contains("Did you mean 'complete'?")
    }
  }

  @Test func strengthOrder() {
    #expect(
      ProtectionClass.byStrength == [
        .none, .completeUntilFirstUserAuthentication, .completeWhenUserInactive, .completeUnlessOpen, .complete,
      ])
    #expect(ProtectionClass.none < .completeUntilFirstUserAuthentication)
    #expect(ProtectionClass.completeWhenUserInactive < .completeUnlessOpen)
    #expect(ProtectionClass.allCases.max() == .complete)
    for (index, value) in ProtectionClass.byStrength.enumerated() { #expect(value.strength == index) }
  }

  /// The walks' decoder picks the class by the value's length: every class, and near misses.
  @Test func auditDecodesEveryClassAndNothingElse() {
    func decode(_ bytes: [UInt8]) -> ProtectionClass? {
      bytes.withUnsafeBytes { ProtectionClass(attributeBytes: $0) }
    }
    for value in ProtectionClass.allCases { #expect(decode(value.attributeValue) == value) }
    #expect(decode(Array("NSFileProtectionNonE".utf8)) == nil)
    #expect(decode(Array("XSFileProtectionComplete".utf8)) == nil)
    #expect(decode(Array("NSFileProtectionComplete\0".utf8)) == nil)
    #expect(decode([]) == nil)
  }

  @Test func rawValuesAreApplesConstants() {
    #expect(ProtectionClass.none.rawValue == "NSFileProtectionNone")
    #expect(
      ProtectionClass.completeUntilFirstUserAuthentication.attributeValue
        == Array("NSFileProtectionCompleteUntilFirstUserAuthentication".utf8))
    #expect(ProtectionClass(attributeValue: Array("NSFileProtectionComplete".utf8)) == .complete)
    #expect(ProtectionClass(attributeValue: Array("NSFileProtectionComplete\0".utf8)) == nil)
    #expect(ProtectionClass(attributeValue: [0xFF, 0x00]) == nil)
    #expect(ProtectionClass.containerDefault == .completeUntilFirstUserAuthentication)
    #expect(ProtectionClass.allCases.map(\.appleClass) == ["D", "A", "B", "C", "CX"])
  }

  @Test(arguments: ProtectionClass.allCases)
  func roundTripsThroughFoundation(cls: ProtectionClass) throws {
    #expect(ProtectionClass(cls.fileProtectionType) == cls)
    #expect(try ProtectionClass(writingOptions: cls.writingOption) == cls)
    #expect(try ProtectionClass(writingOptions: [cls.writingOption, .atomic]) == cls)
  }

  @Test func writingOptionBitsMatchApple() throws {
    #expect(ProtectionClass.none.writingOption.rawValue == 0x1000_0000)
    #expect(ProtectionClass.complete.writingOption.rawValue == 0x2000_0000)
    #expect(ProtectionClass.completeUnlessOpen.writingOption.rawValue == 0x3000_0000)
    #expect(ProtectionClass.completeUntilFirstUserAuthentication.writingOption.rawValue == 0x4000_0000)
    #expect(ProtectionClass.completeWhenUserInactive.writingOption.rawValue == 0x5000_0000)
    #expect(try ProtectionClass(writingOptions: [.atomic]) == nil)
    #expect(throws: ProtFSError.self) {
      try ProtectionClass(writingOptions: Data.WritingOptions(rawValue: 0x7000_0000))
    }
    #expect(FileProtectionType.completeWhenUserInactive.rawValue == "NSFileProtectionCompleteWhenUserInactive")
  }
}

@Suite struct BundleIDTests {
  @Test(arguments: ["com.example.app", "com.example.App-2", "org.x", "a.b.c.d.e"])
  func acceptsReverseDNS(text: String) throws {
    #expect(try BundleID(text).rawValue == text)
  }

  @Test(arguments: [
    ("", "empty"), ("..", "empty label"), ("com..example", "empty label"), (".com.example", "empty label"),
    ("com.example.", "empty label"), ("com/example.app", "'/'"), ("com.example app", "a space"),
    ("app", "single label"), (String(repeating: "a", count: 250) + ".b.com", "255 bytes"), ("com.exämple", "contains"),
  ])
  func rejectsBadIdentifiers(text: String, reason: String) {
    #expect {
      try BundleID(text)
    } throws: { error in
      let error = error as! ProtFSError
      return error.code == .invalidArgument && error.message.contains(reason)
        && error.description.contains("com.example.app")
    }
  }
}

@Suite struct SuggestionTests {
  @Test func findsNearMisses() {
    #expect(Suggestion.nearest(to: "lokc", in: ["lock", "unlock", "ls"]) == "lock")
    #expect(Suggestion.nearest(to: "--recursiv", in: ["--recursive", "--json"]) == "--recursive")
    #expect(Suggestion.nearest(to: "xyzzy", in: ["lock", "unlock"]) == nil)
    #expect(Suggestion.editDistance("kitten", "sitting") == 3)
  }
}
