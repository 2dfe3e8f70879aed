import Foundation

/// Formats a duration, as Foundation's `DateComponentsFormatter` (which Foundation on Linux
/// declares unavailable; this class takes its place in code that imports ProtFSKit), in English
/// as an `en_US` device writes it: "1:02:05", "1h 2m 5s", "1 hr, 2 min, 5 sec", "1 hour, 2 minutes,
/// 5 seconds", "one hour, two minutes, five seconds", "1hr 2min 5sec", with "About" and
/// "remaining" when asked. A duration is split in the allowed units with `calendar` from
/// `referenceDate` (now when nil), so months and years are the calendar's; the smallest unit is
/// not rounded up, and `maximumUnitCount` drops the smaller units. `allowsFractionalUnits` and
/// `formattingContext` are kept and change nothing.
open class DateComponentsFormatter: Formatter, @unchecked Sendable {
  // @unchecked: a formatter is set up, then used, as Foundation's.

  /// How the units are written, as `DateComponentsFormatter.UnitsStyle`.
  public enum UnitsStyle: Int, Sendable {
    /// "1:02:05".
    case positional = 0
    /// "1h 2m 5s".
    case abbreviated = 1
    /// "1 hr, 2 min, 5 sec".
    case short = 2
    /// "1 hour, 2 minutes, 5 seconds".
    case full = 3
    /// "one hour, two minutes, five seconds".
    case spellOut = 4
    /// "1hr 2min 5sec".
    case brief = 5
  }

  /// Which units whose value is 0 are left out, as `DateComponentsFormatter.ZeroFormattingBehavior`.
  public struct ZeroFormattingBehavior: OptionSet, Sendable {
    /// The behaviour's bits.
    public let rawValue: UInt
    /// Makes a behaviour from its bits.
    public init(rawValue: UInt) { self.rawValue = rawValue }
    /// None is left out.
    public static let none = ZeroFormattingBehavior([])
    /// Positional: the leading ones left out, the others padded ("1:00:10"); else all left out.
    public static let `default` = ZeroFormattingBehavior(rawValue: 1)
    /// The leading ones left out.
    public static let dropLeading = ZeroFormattingBehavior(rawValue: 2)
    /// The ones between others left out.
    public static let dropMiddle = ZeroFormattingBehavior(rawValue: 4)
    /// The trailing ones left out.
    public static let dropTrailing = ZeroFormattingBehavior(rawValue: 8)
    /// All left out.
    public static let dropAll = ZeroFormattingBehavior(rawValue: 14)
    /// All shown, and padded ("0:01:05").
    public static let pad = ZeroFormattingBehavior(rawValue: 65536)
  }

  /// How the units are written (`.positional` by default).
  open var unitsStyle = UnitsStyle.positional
  /// The units used, largest first; empty (the default) for years, months, weeks, days, hours,
  /// minutes and seconds.
  open var allowedUnits: NSCalendar.Unit = []
  /// Which units whose value is 0 are left out.
  open var zeroFormattingBehavior = ZeroFormattingBehavior.default
  /// The calendar that splits a duration (the user's by default).
  open var calendar: Calendar? = Calendar.current
  /// The date a duration starts at, for the calendar; now when nil.
  open var referenceDate: Date?
  /// Whether a unit may be fractional (kept: units are whole here).
  open var allowsFractionalUnits = false
  /// How many units at most are written, largest first (0: no limit).
  open var maximumUnitCount = 0
  /// Whether a largest unit of 1 is written in the next unit ("65 seconds", not "1 minute, 5 seconds").
  open var collapsesLargestUnit = false
  /// Whether "About" comes first.
  open var includesApproximationPhrase = false
  /// Whether "remaining" comes last.
  open var includesTimeRemainingPhrase = false
  /// Where the string goes in a sentence (kept).
  open var formattingContext = Formatter.Context.unknown

  /// A positional formatter of every unit.
  public override init() { super.init() }

  /// A formatter from an archive: a default one.
  public required init?(coder: NSCoder) { super.init(coder: coder) }

  /// `obj` (a `DateComponents`, or a number of seconds) written out; nil for anything else.
  open override func string(for obj: Any?) -> String? {
    switch obj {
    case let components as DateComponents: string(from: components)
    case let seconds as TimeInterval: string(from: seconds)
    case let number as NSNumber: string(from: number.doubleValue)
    default: nil
    }
  }

  /// `components` written out, as the duration they add to the reference date.
  open func string(from components: DateComponents) -> String? {
    let calendar = calendar ?? Calendar.current
    let start = referenceDate ?? Date()
    guard let end = calendar.date(byAdding: components, to: start) else { return nil }
    return string(from: start, to: end)
  }

  /// The time from `startDate` to `endDate` written out.
  open func string(from startDate: Date, to endDate: Date) -> String? {
    let negative = endDate < startDate
    let (start, end) = negative ? (endDate, startDate) : (startDate, endDate)
    var units = Self.order.filter { allowedUnits.isEmpty || allowedUnits.contains($0.unit) }
    if units.isEmpty { return nil }
    var values = split(from: start, to: end, in: units)
    if collapsesLargestUnit, units.count > 1, let first = values.firstIndex(where: { $0 != 0 }), values[first] == 1,
      first < units.count - 1
    {
      units.remove(at: first)
      values = split(from: start, to: end, in: units)
    }
    var shown = kept(values)
    if maximumUnitCount > 0 { shown = Array(shown.prefix(maximumUnitCount)) }
    var text = write(shown.map { (units[$0], values[$0]) }, negative: negative)
    if includesApproximationPhrase { text = "About " + text }
    if includesTimeRemainingPhrase { text += " remaining" }
    return text
  }

  /// `ti` seconds written out.
  open func string(from ti: TimeInterval) -> String? {
    guard ti.isFinite else { return nil }
    let start = referenceDate ?? Date()
    return string(from: start, to: start + ti)
  }

  /// `components` written out in `unitsStyle` with the other settings at their defaults.
  open class func localizedString(from components: DateComponents, unitsStyle: UnitsStyle) -> String? {
    let formatter = DateComponentsFormatter()
    formatter.unitsStyle = unitsStyle
    return formatter.string(from: components)
  }

  // MARK: - Splitting and writing

  /// A unit: its calendar component and its names in the styles that name it.
  struct Unit {
    let unit: NSCalendar.Unit
    let component: Calendar.Component
    /// Abbreviated, brief, short singular, short plural, full singular.
    let abbreviated: String
    let brief: String
    let short: String
    let shortPlural: String
    let full: String
    /// Whether it is written with colons in the positional style.
    var isTime: Bool { [.hour, .minute, .second].contains(component) }
  }

  /// The units, largest first.
  static let order: [Unit] = [
    Unit(unit: .year, component: .year, abbreviated: "y", brief: "yr", short: "yr", shortPlural: "yrs", full: "year"),
    Unit(
      unit: .month, component: .month, abbreviated: "mo", brief: "mth", short: "mth", shortPlural: "mths",
      full: "month"),
    Unit(
      unit: .weekOfMonth, component: .weekOfMonth, abbreviated: "w", brief: "wk", short: "wk", shortPlural: "wks",
      full: "week"),
    Unit(unit: .day, component: .day, abbreviated: "d", brief: "d", short: "day", shortPlural: "days", full: "day"),
    Unit(unit: .hour, component: .hour, abbreviated: "h", brief: "hr", short: "hr", shortPlural: "hr", full: "hour"),
    Unit(
      unit: .minute, component: .minute, abbreviated: "m", brief: "min", short: "min", shortPlural: "min",
      full: "minute"),
    Unit(
      unit: .second, component: .second, abbreviated: "s", brief: "sec", short: "sec", shortPlural: "sec",
      full: "second"),
  ]

  /// The time from `start` to `end` (in order) in `units`, with the calendar.
  private func split(from start: Date, to end: Date, in units: [Unit]) -> [Int] {
    let calendar = calendar ?? Calendar.current
    let components = calendar.dateComponents(Set(units.map(\.component)), from: start, to: end)
    return units.map { components.value(for: $0.component) ?? 0 }
  }

  /// The indices of `values` that are written, as `zeroFormattingBehavior` says.
  private func kept(_ values: [Int]) -> [Int] {
    let all = Array(values.indices)
    guard let first = values.firstIndex(where: { $0 != 0 }), let last = values.lastIndex(where: { $0 != 0 }) else {
      // Nothing but zeros: the smallest unit, unless every unit is to be shown.
      let shown = zeroFormattingBehavior.contains(.pad) || zeroFormattingBehavior == .none
      return shown ? all : [values.count - 1]
    }
    if zeroFormattingBehavior.contains(.pad) { return all }
    var drop = zeroFormattingBehavior
    if drop.contains(.default) { drop = unitsStyle == .positional ? .dropLeading : .dropAll }
    if unitsStyle == .positional { drop.subtract([.dropMiddle, .dropTrailing]) }
    return all.filter { index in
      guard values[index] == 0 else { return true }
      if index < first { return !drop.contains(.dropLeading) }
      if index > last { return !drop.contains(.dropTrailing) }
      return !drop.contains(.dropMiddle)
    }
  }

  /// `parts` written in the style, the first with a minus sign when `negative`.
  private func write(_ parts: [(Unit, Int)], negative: Bool) -> String {
    let sign = negative ? "-" : ""
    switch unitsStyle {
    case .positional:
      let days = parts.filter { !$0.0.isTime }.map { "\($0.1)\($0.0.abbreviated)" }
      let times = parts.filter(\.0.isTime).enumerated().map { index, part in
        index == 0 ? String(part.1) : String(format: "%02d", part.1)
      }
      let words = days + (times.isEmpty ? [] : [times.joined(separator: ":")])
      return sign + words.joined(separator: " ")
    case .abbreviated:
      return sign + parts.map { "\($0.1)\($0.0.abbreviated)" }.joined(separator: " ")
    case .brief:
      return sign + parts.map { "\($0.1)\($0.1 == 1 ? $0.0.brief : Self.briefPlural($0.0))" }.joined(separator: " ")
    case .short:
      return sign + parts.map { "\($0.1) \($0.1 == 1 ? $0.0.short : $0.0.shortPlural)" }.joined(separator: ", ")
    case .full:
      return sign + parts.map { "\($0.1) \($0.0.full)\($0.1 == 1 ? "" : "s")" }.joined(separator: ", ")
    case .spellOut:
      let speller = NumberFormatter()
      speller.numberStyle = .spellOut
      speller.locale = Locale(identifier: "en_US")
      let words = parts.map { part in
        let number = speller.string(from: NSNumber(value: part.1)) ?? String(part.1)
        return "\(number) \(part.0.full)\(part.1 == 1 ? "" : "s")"
      }
      return (negative ? "minus " : "") + words.joined(separator: ", ")
    }
  }

  /// A unit's plural in the brief style: the short one for the units that take an "s".
  private static func briefPlural(_ unit: Unit) -> String {
    [.year, .month, .weekOfMonth].contains(unit.component) ? unit.shortPlural : unit.brief
  }
}
