import ProtFS

/// Aligned columns for people, the way `ls -l` and `du` print them.
extension Console {
  /// Prints rows as aligned columns; columns listed in `right` are right-aligned. A cell is one
  /// line: its line breaks and other controls are escaped (`TerminalText`), as a name an app or a
  /// server chose could otherwise print a line of its own making.
  package static func table(_ rows: [[String]], right: Set<Int> = [], indent: String = "") {
    let rows = rows.map { $0.map { TerminalText.escaped($0) } }
    guard let first = rows.first else { return }
    let widths = (0..<first.count).map { column in rows.map { $0[column].count }.max()! }
    for row in rows {
      var line = indent
      for (column, cell) in row.enumerated() {
        let pad = String(repeating: " ", count: widths[column] - cell.count)
        let last = column == row.count - 1
        line += right.contains(column) ? pad + cell : cell + (last ? "" : pad)
        if !last { line += "  " }
      }
      Console.out(line)
    }
  }
}
