/// What an item inherits, and the one place the inheritance rule is written (docs/semantics.md §2):
/// an item's effective class is its own class, else the nearest ancestor's own class inside the
/// device, else its container's default class, else class C.
///
/// Walks carry one value per directory down the tree (`below(own:)`); lookups by path fold one
/// per component.
public struct ClassInheritance: Sendable, Equatable {
  /// The own class of the nearest ancestor that has one, inside the device.
  public var ancestor: ProtectionClass?
  /// The default class stored on the enclosing container's root, if any.
  public var containerDefault: ProtectionClass?

  /// An inheritance from `ancestor` and `containerDefault`.
  public init(ancestor: ProtectionClass? = nil, containerDefault: ProtectionClass? = nil) {
    self.ancestor = ancestor
    self.containerDefault = containerDefault
  }

  /// The effective class of an item whose own class is `own`, and where it came from.
  public func effective(own: ProtectionClass?) -> EffectiveClass {
    if let own { return EffectiveClass(own, .own) }
    if let ancestor { return EffectiveClass(ancestor, .inherited) }
    return EffectiveClass(containerDefault ?? .containerDefault, .default)
  }

  /// The effective class alone, for hot loops that do not report where it came from.
  public func effectiveClass(own: ProtectionClass?) -> ProtectionClass {
    own ?? ancestor ?? containerDefault ?? .containerDefault
  }

  /// What the children of a directory whose own class is `own` inherit.
  public func below(own: ProtectionClass?) -> ClassInheritance {
    guard let own else { return self }
    return ClassInheritance(ancestor: own, containerDefault: containerDefault)
  }

  /// The same inheritance inside a container whose root stores `containerDefault` (nil: none stored).
  public func inContainer(defaultClass containerDefault: ProtectionClass?) -> ClassInheritance {
    ClassInheritance(ancestor: ancestor, containerDefault: containerDefault)
  }
}
