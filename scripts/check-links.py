#!/usr/bin/python3
"""Checks the links of the repository's Markdown documentation.

Usage: scripts/check-links.py [ROOT]          (ROOT: the repository, default this script's ../)
       scripts/check-links.py --self-test

Reads README.md and every docs/**/*.md under ROOT. Every Markdown link or image target,
`[text](target)`, `![alt](target)` and reference definitions `[label]: target`, that is relative
must name a file or directory inside ROOT; a `file.md#anchor` target must also name a heading
of that file, and `#anchor` alone one of the same file (GitHub's slugs: lower case, punctuation
but `-` and `_` dropped, spaces to `-`, repeated headings numbered `-1`, `-2`, ...). Targets with
a scheme (https:, mailto:, ...) are not fetched. A target that leaves ROOT, an absolute path and
the text `../shared/` anywhere in a file are problems too. Links in fenced code blocks and in
inline code spans are not links.

Prints `FILE:LINE: message` per problem, then `check-links: N files, M links, K problems`, and
exits 1 when there are problems, else 0. Standard library only.
"""

import argparse
import os
import re
import sys
import tempfile
import urllib.parse

FORBIDDEN_TEXT = "../shared/"

# Link text: anything but brackets, or one level of nested [..] (e.g. `[a [b] c](x)`).
_TEXT = r"(?:[^\[\]]|\[[^\[\]]*\])*"
# Destination: <...>, or a run without spaces whose parentheses balance one level deep.
_DEST = r"<[^<>\n]*>|[^\s()<>]*(?:\([^\s()]*\)[^\s()<>]*)*"
_TITLE = r"""(?:\s+(?:"[^"]*"|'[^']*'|\([^()]*\)))?"""
INLINE_LINK = re.compile(r"!?\[" + _TEXT + r"\]\(\s*(" + _DEST + r")" + _TITLE + r"\s*\)")
REFERENCE_DEF = re.compile(r"^ {0,3}\[([^\]^][^\]]*)\]:[ \t]*(<[^<>\n]*>|\S+)")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
ATX_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
SETEXT_UNDERLINE = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
BLANK_LINE = re.compile(r"\n[ \t]*(?:\n|$)")
HTML_ANCHOR = re.compile(r"""<a\s[^>]*\b(?:name|id)\s*=\s*["']([^"']+)["']""", re.IGNORECASE)


class Problem:
    def __init__(self, path, line, message):
        self.path, self.line, self.message = path, line, message

    def format(self, root):
        return "%s:%d: %s" % (os.path.relpath(self.path, root), self.line, self.message)


def mask_code(text):
    """Returns text with fenced code blocks and inline code spans (and backslash-escaped
    brackets) replaced by spaces, newlines kept, so offsets and line numbers stay valid."""
    lines = text.split("\n")
    out = []
    fence = None  # the opening fence's character and length while inside a block
    for line in lines:
        m = FENCE.match(line)
        if fence is None and m:
            fence = (m.group(1)[0], len(m.group(1)))
            out.append(" " * len(line))
            continue
        if fence is not None:
            closing = re.match(r"^ {0,3}(" + re.escape(fence[0]) + r"{%d,})[ \t]*$" % fence[1], line)
            if closing:
                fence = None
            out.append(" " * len(line))
            continue
        out.append(line)
    masked = "\n".join(out)
    masked = re.sub(r"\\[\[\]()]", "  ", masked)
    # Inline code: a run of N backticks up to the next run of exactly N, within one paragraph.
    result = []
    i = 0
    n = len(masked)
    while i < n:
        if masked[i] != "`":
            result.append(masked[i])
            i += 1
            continue
        j = i
        while j < n and masked[j] == "`":
            j += 1
        run = j - i
        k = j
        close = -1
        while k < n:
            if masked[k] == "\n" and BLANK_LINE.match(masked, k):
                break  # a code span does not cross a paragraph
            if masked[k] == "`":
                e = k
                while e < n and masked[e] == "`":
                    e += 1
                if e - k == run:
                    close = e
                    break
                k = e
                continue
            k += 1
        if close < 0:  # an unmatched backtick run is literal text
            result.append(masked[i:j])
            i = j
            continue
        result.append("".join(c if c == "\n" else " " for c in masked[i:close]))
        i = close
    return "".join(result)


def slugify(heading):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links and images: their text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors_of(path, cache):
    """Every anchor a Markdown file offers: its headings' slugs and explicit HTML anchors."""
    if path in cache:
        return cache[path]
    with open(path, encoding="utf-8") as f:
        text = f.read()
    masked_lines = mask_fences_only(text).split("\n")
    anchors = set()
    counts = {}

    def add(slug):
        n = counts.get(slug, 0)
        counts[slug] = n + 1
        anchors.add(slug if n == 0 else "%s-%d" % (slug, n))

    previous = ""
    for line in masked_lines:
        m = ATX_HEADING.match(line)
        if m:
            add(slugify(m.group(2) or ""))
        elif SETEXT_UNDERLINE.match(line) and previous.strip() and not re.match(
                r"^\s*([-*+|>#]|\d+[.)])", previous) and not SETEXT_UNDERLINE.match(previous):
            add(slugify(previous))
        for a in HTML_ANCHOR.findall(line):
            anchors.add(a.lower())
        previous = line
    cache[path] = anchors
    return anchors


def mask_fences_only(text):
    out = []
    fence = None
    for line in text.split("\n"):
        m = FENCE.match(line)
        if fence is None and m:
            fence = (m.group(1)[0], len(m.group(1)))
            out.append("")
            continue
        if fence is not None:
            if re.match(r"^ {0,3}(" + re.escape(fence[0]) + r"{%d,})[ \t]*$" % fence[1], line):
                fence = None
            out.append("")
            continue
        out.append(line)
    return "\n".join(out)


def inside(root, path):
    return os.path.commonpath([root, path]) == root


def check_target(root, source, line, target, problems, cache):
    if target.startswith("<") and target.endswith(">"):
        target = target[1:-1].strip()
    if not target:
        problems.append(Problem(source, line, "empty link target"))
        return
    if target.startswith("//"):
        return  # protocol-relative: a network address
    if SCHEME.match(target):
        if target.lower().startswith("file:"):
            problems.append(Problem(source, line, "link to %s: file: links point outside the repository" % target))
        return  # http:, https:, mailto:, ...: not fetched
    path_part, _, anchor = target.partition("#")
    path_part = urllib.parse.unquote(path_part.split("?", 1)[0])
    anchor = urllib.parse.unquote(anchor)
    if path_part.startswith("/"):
        problems.append(Problem(source, line, "link to %s: an absolute path; use a relative one" % target))
        return
    if path_part:
        resolved = os.path.normpath(os.path.join(os.path.dirname(source), path_part))
        if not inside(root, resolved) or not inside(root, os.path.realpath(resolved)):
            problems.append(Problem(source, line, "link to %s leaves the repository" % target))
            return
        if not os.path.exists(resolved):
            problems.append(Problem(source, line, "link to %s: %s does not exist" %
                                    (target, os.path.relpath(resolved, root))))
            return
    else:
        resolved = source
    if anchor and os.path.isfile(resolved) and resolved.lower().endswith((".md", ".markdown")):
        if anchor.lower() not in anchors_of(resolved, cache):
            where = "this file" if resolved == source else os.path.relpath(resolved, root)
            problems.append(Problem(source, line, "link to %s: no heading #%s in %s" % (target, anchor, where)))


def check_file(root, path, all_problems, cache):
    """Checks one file, adding its problems in line order; returns the number of links in it."""
    problems = []
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for number, raw in enumerate(text.split("\n"), start=1):
        start = 0
        while True:
            at = raw.find(FORBIDDEN_TEXT, start)
            if at < 0:
                break
            problems.append(Problem(path, number, "mentions %s, outside the repository" % FORBIDDEN_TEXT))
            start = at + 1
    masked = mask_code(text)
    links = 0
    for m in INLINE_LINK.finditer(masked):
        links += 1
        line = masked.count("\n", 0, m.start(1)) + 1
        check_target(root, path, line, m.group(1), problems, cache)
    for number, raw in enumerate(masked.split("\n"), start=1):
        m = REFERENCE_DEF.match(raw)
        if m:
            links += 1
            check_target(root, path, number, m.group(2), problems, cache)
    all_problems.extend(sorted(problems, key=lambda p: p.line))
    return links


def markdown_files(root):
    files = []
    readme = os.path.join(root, "README.md")
    if os.path.isfile(readme):
        files.append(readme)
    docs = os.path.join(root, "docs")
    for directory, subdirs, names in os.walk(docs):
        subdirs.sort()
        for name in sorted(names):
            if name.endswith(".md"):
                files.append(os.path.join(directory, name))
    return files


def check(root):
    """Returns (files, links, problems) for the repository at root."""
    root = os.path.realpath(root)
    problems = []
    cache = {}
    files = markdown_files(root)
    links = 0
    for path in files:
        links += check_file(root, path, problems, cache)
    return files, links, problems


def self_test():
    """A tree with one good link, one to a missing file, one to a missing anchor and one that
    leaves the tree (plus links the checker must ignore): exactly those three are reported."""
    with tempfile.TemporaryDirectory() as outer:
        root = os.path.join(outer, "repo")
        os.makedirs(os.path.join(root, "docs"))
        with open(os.path.join(outer, "outside.md"), "w", encoding="utf-8") as f:
            f.write("# Outside\n")
        with open(os.path.join(root, "docs", "a.md"), "w", encoding="utf-8") as f:
            f.write("# Page A\n\n## The `good` heading: here\n")
        with open(os.path.join(root, "README.md"), "w", encoding="utf-8") as f:
            f.write("# Test\n\n"
                    "A [good link](docs/a.md#the-good-heading-here).\n"
                    "A [missing file](docs/missing.md).\n"
                    "A [bad anchor](docs/a.md#no-such-heading).\n"
                    "A [way out](../outside.md).\n"
                    "Ignored: `[code](nowhere.md)`, [web](https://example.com/x.md).\n"
                    "```\n[fenced](nowhere.md)\n```\n")
        files, links, problems = check(root)
        real = os.path.realpath(root)
        found = sorted(p.format(real) for p in problems)
        expected = [
            ("README.md:4:", "docs/missing.md does not exist"),
            ("README.md:5:", "no heading #no-such-heading"),
            ("README.md:6:", "leaves the repository"),
        ]
        ok = len(found) == 3 and all(
            any(line.startswith(where) and what in line for line in found) for where, what in expected)
        ok = ok and len(files) == 2 and links == 5
        for line in found:
            print("  " + line)
        print("check-links self-test: %d files, %d links, %d problems: %s" %
              (len(files), links, len(found), "ok" if ok else "FAILED (expected exactly 3, one of each kind)"))
        return 0 if ok else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    default_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("root", nargs="?", default=default_root, help="the repository (default: %(default)s)")
    parser.add_argument("--self-test", action="store_true", help="check the checker on a small temporary tree")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    root = os.path.realpath(args.root)
    if not os.path.isdir(root):
        print("check-links: %s is not a directory" % args.root, file=sys.stderr)
        return 2
    files, links, problems = check(root)
    for p in problems:
        print(p.format(root))
    print("check-links: %d files, %d links, %d problems" % (len(files), links, len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
