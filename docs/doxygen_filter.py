#!/usr/bin/env python3
"""docs/doxygen_filter.py: doxygen's INPUT_FILTER. Our headers comment with `//` (one line on what a thing is, above
it, or after it on the same line); doxygen documents only `///` comments, so this reads them as such: a comment
line above a declaration becomes `///`, a trailing one `///<`, and the file's "path: purpose" first line the
file's own documentation. Comments inside function bodies stay plain."""
import re
import sys


def escaped(comment: str) -> str:
    """Comment text as doxygen reads it literally: A@B, <root>/v1, ::what are prose, not commands, tags or links."""
    parts = comment.split("`")  # `code spans` (the odd parts) are literal already
    for i in range(0, len(parts), 2):
        parts[i] = re.sub(r"([@<>\\#]|::)", r"\\\1", parts[i])
    return "`".join(parts)


def main() -> None:
    lines = open(sys.argv[1], encoding="utf-8").read().split("\n")
    out = []
    for number, line in enumerate(lines):
        if number == 0 and line.startswith("// ") and ": " in line:
            path, purpose = line[3:].split(": ", 1)
            out.append(f"/// @file {path.rsplit('/', 1)[-1]} {escaped(purpose)}")  # one line: line numbers stay
            continue
        stripped = line.lstrip()
        if stripped.startswith("// ") or stripped == "//":
            code, comment = line.split("//", 1)
            line = code + "///" + escaped(comment)
        elif "// " in line and not stripped.startswith("#"):
            code, comment = line.split("// ", 1)
            if code.rstrip().endswith((";", ",", "{")) and '"' not in code:
                line = code + "///< " + escaped(comment)
        out.append(line)
    sys.stdout.write("\n".join(out))


if __name__ == "__main__":
    main()
