#!/usr/bin/env python3
"""Prints the `swift test --filter` pattern that selects the tests tagged `.fast` (make test-fast).

SwiftPM's --filter cannot select by tag, so this reads the tags from Tests/: each
`@Suite(.tags(.fast), ...)` names its suite, each `@Test(.tags(.fast), ...)` its suite and function.
It fails, rather than leaving a test out silently, when it cannot name what a tag is on.
What a tagged test may not do is checked at run time (Tests/RelaisTestSupport/FastTests.swift).
"""
import pathlib
import re
import sys

TYPE = re.compile(r"^(\s*)(?:@\w+(?:\(.*\))?\s+)*(?:(?:public|internal|private|fileprivate|final)\s+)*(?:struct|enum|class|actor)\s+(\w+)")
FUNC = re.compile(r"\bfunc\s+(\w+)\s*\(")

root = pathlib.Path(__file__).resolve().parent.parent / "Tests"
patterns, problems = [], []
for path in sorted(root.rglob("*.swift")):
    module = path.relative_to(root).parts[0]
    lines = path.read_text(encoding="utf-8").split("\n")
    for number, line in enumerate(lines):
        if ".tags(.fast" not in line or line.strip().startswith("//"):
            continue
        where = f"{path.relative_to(root.parent)}:{number + 1}"
        # The declaration the attribute is on: this line or the next that declares something.
        declaration = next((l for l in lines[number:number + 4] if TYPE.match(l) or FUNC.search(l)), None)
        if "@Suite" in line and declaration and TYPE.match(declaration):
            patterns.append(rf"^{module}\.(\w+/)*{TYPE.match(declaration).group(2)}/")
        elif "@Test" in line and declaration and FUNC.search(declaration):
            indent = len(line) - len(line.lstrip())
            enclosing = next((TYPE.match(l) for l in reversed(lines[:number]) if TYPE.match(l) and len(TYPE.match(l).group(1)) < indent), None)
            if enclosing is None:
                problems.append(f"{where}: a fast @Test outside a suite")
                continue
            patterns.append(rf"^{module}\.(\w+/)*{enclosing.group(2)}/{FUNC.search(declaration).group(1)}\(")
        else:
            problems.append(f"{where}: .tags(.fast) on something this script cannot name")
if problems or not patterns:
    sys.exit("\n".join(problems) or "no test is tagged .fast")
print("|".join(patterns))
