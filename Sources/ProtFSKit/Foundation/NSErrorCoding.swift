import Foundation

// An `NSError` kept with `NSKeyedArchiver`, as apps keep a task's error (Tiercel stores its tasks
// so). On Apple's platforms `NSError` is `NSSecureCoding`; Foundation on Linux declares it so too,
// but traps in `NSError.hash`, which the archiver asks of every object it archives, so the app
// dies. These two overloads, chosen by Swift for an argument typed `NSError` and for
// `ofClass: NSError.self`, archive the error's domain, code and the user info values an archive
// can hold, and make an `NSError` of them again.

extension NSKeyedArchiver {
  /// `error` archived (its domain, its code and the user info values that are strings, numbers,
  /// data, dates, URLs or underlying errors), for
  /// `NSKeyedUnarchiver.unarchivedObject(ofClass: NSError.self, from:)`.
  public class func archivedData(
    withRootObject error: NSError, requiringSecureCoding requiresSecureCoding: Bool
  ) throws -> Data {
    try archivedData(
      withRootObject: ArchivedError.dictionary(of: error, depth: 0), requiringSecureCoding: requiresSecureCoding)
  }
}

extension NSKeyedUnarchiver {
  /// The error `archivedData(withRootObject:requiringSecureCoding:)` archived; throws
  /// `NSCoderReadCorruptError` for data that holds none.
  public static func unarchivedObject(ofClass cls: NSError.Type, from data: Data) throws -> NSError? {
    let root = try unarchivedObject(
      ofClasses: [NSDictionary.self, NSArray.self, NSString.self, NSNumber.self, NSData.self, NSDate.self], from: data)
    guard let dictionary = root as? [String: Any], let error = ArchivedError.error(from: dictionary, depth: 0) else {
      throw NSError(
        domain: NSCocoaErrorDomain, code: CocoaError.coderReadCorrupt.rawValue,
        userInfo: [NSDebugDescriptionErrorKey: "The data holds no archived NSError."])
    }
    return error
  }
}

/// The dictionary an `NSError` is archived as.
enum ArchivedError {
  private static let domain = "NSErrorDomain"
  private static let code = "NSErrorCode"
  private static let userInfo = "NSErrorUserInfo"
  private static let urls = "NSErrorUserInfoURLs"
  private static let errors = "NSErrorUserInfoErrors"
  /// How deep underlying errors are followed.
  private static let maximumDepth = 8

  static func dictionary(of error: NSError, depth: Int) -> NSDictionary {
    var values: [String: Any] = [:]
    var urlValues: [String: String] = [:]
    var errorValues: [String: NSDictionary] = [:]
    for (key, value) in error.userInfo {
      switch value {
      case let text as String: values[key] = text
      case let flag as Bool: values[key] = NSNumber(value: flag)
      case let number as Int: values[key] = NSNumber(value: number)
      case let number as Int64: values[key] = NSNumber(value: number)
      case let number as Double: values[key] = NSNumber(value: number)
      case let number as NSNumber: values[key] = number
      case let data as Data: values[key] = data
      case let date as Date: values[key] = date
      case let url as URL: urlValues[key] = url.absoluteString
      case let underlying as NSError where depth < maximumDepth:
        errorValues[key] = dictionary(of: underlying, depth: depth + 1)
      default: continue
      }
    }
    return [
      Self.domain: error.domain, Self.code: NSNumber(value: error.code), Self.userInfo: values as NSDictionary,
      Self.urls: urlValues as NSDictionary, Self.errors: errorValues as NSDictionary,
    ]
  }

  static func error(from dictionary: [String: Any], depth: Int) -> NSError? {
    guard let domain = dictionary[Self.domain] as? String, let code = (dictionary[Self.code] as? NSNumber)?.intValue,
      depth <= maximumDepth
    else { return nil }
    var info = dictionary[Self.userInfo] as? [String: Any] ?? [:]
    for (key, text) in dictionary[Self.urls] as? [String: String] ?? [:] { info[key] = URL(string: text) }
    for (key, inner) in dictionary[Self.errors] as? [String: Any] ?? [:] {
      if let inner = inner as? [String: Any], let underlying = error(from: inner, depth: depth + 1) {
        info[key] = underlying
      }
    }
    return NSError(domain: domain, code: code, userInfo: info)
  }
}
