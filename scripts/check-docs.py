#!/usr/bin/env python3
"""Checks that keep the documentation true; run by scripts/test.sh. Needs no server and no
package beyond Python's standard library; takes a second or two.

    scripts/check-docs.py [--binary PATH] [CHECK ...]

  links     every relative link and #anchor in the Markdown files resolves (files, folders,
            headings by GitHub's anchor rules)
  flags     docs/configuration.md against `serve --help`, `migrate --help` and `token --help` of
            the built binary: every flag there has an entry with the same variable and default,
            and the page documents no flag the binary lacks
  metrics   docs/metrics.md against the metric catalogue (MetricFamily.swift): every family,
            its type and labels, and the values of the `event` labels of the cache and of the
            memcached breaker; and the sources create every metric through the catalogue, with
            the swift-metrics type of its kind
  commands  the commands the README and the user documents show, statically (running them
            needs the servers; the test suite's end-to-end tests drive the same routes): every
            scripts/ path exists (a .sh executable), its subcommand or option is one the script
            takes, profile-service and profilectl subcommands and flags are in the binaries'
            --help, `swift build --product` names a product, and every curl line's method and
            path is a route of openapi.yaml
  history   no issue numbers or words of the project's own history in the user documents (all
            Markdown but CHANGELOG.md; see HISTORY_EXEMPT)

The binary is --binary, else $PROFILE_SERVICE_BIN, else .build/debug/profile-service;
profilectl is looked for beside it, then in .build/debug and .build/release. Both are run with
every PROFILE_* variable removed, so --help shows the built-in defaults. Prints one line per
check and exits 1 if any failed.
"""

import argparse
import os
import re
import shlex
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Markdown files that are documentation (links checked everywhere, history outside CHANGELOG.md).
DOC_FILES = ["README.md", "CHANGELOG.md", "CONTRIBUTING.md", "SECURITY.md"]
DOC_FOLDERS = ["docs"]
# Documents the history check leaves alone, and why (printed with the result).
HISTORY_EXEMPT = {
    "CHANGELOG.md": "the project's history belongs there",
}
HISTORY_PATTERNS = [
    (r"\bissues? #?\d+", "an issue number"),
    (r"(?<![\w/(`])#\d+\b", "an issue or pull-request number"),
    (r"\b(?:this|that|the|a|an|previous|earlier|last|next|later|same|other) (?:previous |earlier )?sessions?\b(?! (?:to|of|that|is|are|was|with|runs|holds|per|the|a|\())",
     "the sessions that built the project"),
    (r"\bsession'?s changes\b", "the sessions that built the project"),
    (r"(?-i:\bDESIGN\.md\b)", "a document that is not in the repository"),
    (r"\b(?:was|were) (?:tried|removed|added|changed) (?:and|in|on|before|after)\b", "what earlier work changed"),
    (r"\bthe first version\b", "what earlier work changed"),
    (r"\bno longer\b|\bused to\b|\bpreviously\b", "what earlier work changed"),
    (r"\buntil (?:now|recently)\b|\bfor now\b", "what earlier work changed"),
]
COMMAND_FILES = ["README.md", "CONTRIBUTING.md"] + [f"docs/{n}" for n in ("getting-started.md", "api.md", "client.md", "configuration.md", "deployment.md", "operations.md", "performance.md", "read-replicas.md", "security.md", "testing.md", "change-feed.md")]
SUBCOMMANDS = ("serve", "migrate", "cache-cluster list", "cache-cluster drop", "token", "openapi")


def read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


def markdown_files():
    files = [f for f in DOC_FILES if os.path.exists(os.path.join(ROOT, f))]
    for folder in DOC_FOLDERS:
        for directory, _, names in os.walk(os.path.join(ROOT, folder)):
            for name in sorted(names):
                if name.endswith(".md"):
                    files.append(os.path.relpath(os.path.join(directory, name), ROOT))
    return files


def strip_code(text):
    """The text with fenced blocks and inline code blanked (line numbers kept)."""
    out, fenced = [], False
    for line in text.split("\n"):
        if re.match(r"^\s*(```|~~~)", line):
            fenced = not fenced
            out.append("")
            continue
        out.append("" if fenced else re.sub(r"`+[^`]*`+", lambda m: " " * len(m.group(0)), line))
    return out


def fenced_blocks(text):
    """(language, first line number, lines) of each fenced code block."""
    blocks, current = [], None
    for number, line in enumerate(text.split("\n"), 1):
        fence = re.match(r"^\s*(```|~~~)\s*([\w+-]*)", line)
        if fence and current is None:
            current = (fence.group(2).lower(), number + 1, [])
        elif fence:
            blocks.append(current)
            current = None
        elif current is not None:
            current[2].append(line)
    return blocks


# MARK: anchors and links

def slug(heading):
    """GitHub's anchor of a heading: its text lower-cased, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links and images: their text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.replace("`", "").lower().strip()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    """Every anchor a Markdown file defines: headings (with GitHub's -1, -2 for repeats) and ids."""
    result, seen, fenced = set(), {}, False
    for line in read(path).split("\n"):
        if re.match(r"^\s*(```|~~~)", line):
            fenced = not fenced
            continue
        if fenced:
            continue
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading:
            base = slug(heading.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            result.add(base if count == 0 else f"{base}-{count}")
        for match in re.finditer(r"<a\s+(?:id|name)=\"([^\"]+)\"", line):
            result.add(match.group(1))
    return result


def links(path):
    """(line number, target) of every link and image outside code, inline and reference style."""
    found = []
    for number, line in enumerate(strip_code(read(path)), 1):
        for match in re.finditer(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)", line):
            found.append((number, match.group(1)))
        reference = re.match(r"^\s*\[[^\]]+\]:\s*(\S+)", line)
        if reference:
            found.append((number, reference.group(1)))
    return found


def check_links():
    problems, count, cache = [], 0, {}
    for path in markdown_files():
        for number, target in links(path):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # https:, mailto:, …
                continue
            count += 1
            file_part, _, anchor = target.partition("#")
            if file_part:
                resolved = os.path.normpath(os.path.join(os.path.dirname(path), file_part))
                if resolved.startswith(".."):
                    problems.append(f"{path}:{number}: {target} leaves the repository")
                    continue
                if not os.path.exists(os.path.join(ROOT, resolved)):
                    problems.append(f"{path}:{number}: {target}: no file {resolved}")
                    continue
            else:
                resolved = path
            if anchor and resolved.endswith(".md"):
                if resolved not in cache:
                    cache[resolved] = anchors(resolved)
                if anchor not in cache[resolved]:
                    problems.append(f"{path}:{number}: {target}: no heading or id '{anchor}' in {resolved}")
    assert not problems, "\n  " + "\n  ".join(problems)
    return f"{count} relative links in {len(markdown_files())} files"


# MARK: flags

def run_help(binary, *arguments):
    if not os.access(binary, os.X_OK):
        raise AssertionError(f"no executable {binary}: build it first (swift build), or pass --binary")
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("PROFILE_", "PROFILECTL_"))}
    out = subprocess.run([binary, *arguments, "--help"], capture_output=True, text=True, timeout=60, env=environment)
    assert out.returncode == 0, f"{binary} {' '.join(arguments)} --help exited {out.returncode}: {out.stderr.strip()}"
    return out.stdout


def canonical(flag):
    """A flag's name without its negation: `--[no-]change-feed` (as the page writes it) and
    `--change-feed/--no-change-feed` (as --help does) are both `--change-feed`."""
    return re.sub(r"^--\[no-\]", "--", flag)


def help_options(text):
    """{flag: (variable or None, default or None)} of an ArgumentParser help text's options."""
    entries, current = [], None
    for line in text.split("\n"):
        head = re.match(r"^  (-\S.*?)(?:\s{2,}(.*))?$", line)
        if head:
            current = [head.group(1), head.group(2) or ""]
            entries.append(current)
        elif current is not None and line.startswith("   ") and line.strip():
            current[1] += " " + line.strip()
        elif not line.strip() or not line.startswith(" "):
            current = None
    options = {}
    for names, description in entries:
        flags = [n for n in re.findall(r"--[\w\[\]-]+", names)]
        if not flags or flags[0] in ("--help", "--version"):
            continue
        variable = re.search(r"\[(PROFILE_[A-Z0-9_]+)", description)
        default = re.search(r"[(;] ?default: (.*?)\)\s*$", description)
        options[flags[0]] = (variable.group(1) if variable else None, default.group(1) if default else None)
    return options


def documented_options(path="docs/configuration.md"):
    """{subcommand: ({flag: (variable, default, line)}, {shared flag: line})} from the page."""
    pages, subcommand = {}, None
    lines = read(path).split("\n")
    for index, line in enumerate(lines):
        section = re.match(r"^## `profile-service (\w[\w-]*(?: \w[\w-]*)?)`\s*$", line)
        if section:
            subcommand = section.group(1)
            pages[subcommand] = ({}, {})
            continue
        if subcommand is None:
            continue
        own, shared = pages[subcommand]
        flag = re.match(r"^#{3,6} `(--[\w\[\]-]+)`\s*$", line)
        if flag:
            following = next((l for l in lines[index + 1:] if l.strip()), "")
            entry = re.match(r"^Variable: (?:`(PROFILE_[A-Z0-9_]+)`|none) · Default: (?:`([^`]*)`|none)\s*$", following)
            assert entry, f"{path}:{index + 1}: {flag.group(1)} is not followed by 'Variable: … · Default: …'"
            assert canonical(flag.group(1)) not in own, f"{path}:{index + 1}: {flag.group(1)} documented twice"
            own[canonical(flag.group(1))] = (entry.group(1), entry.group(2), index + 1)
        if line.startswith("Shared with serve:"):
            paragraph = []
            for following in lines[index:]:
                if not following.strip():
                    break
                paragraph.append(following)
            for shared_flag in re.findall(r"\[`(--[\w\[\]-]+)`\]\(#", " ".join(paragraph)):
                shared[canonical(shared_flag)] = index + 1
    return pages


def check_flags(binary):
    path = "docs/configuration.md"
    pages = documented_options(path)
    problems = []
    assert set(pages) == set(SUBCOMMANDS), f"{path} has sections for {sorted(pages)}, expected {list(SUBCOMMANDS)}"
    serve_page = pages["serve"][0]
    total = 0
    for subcommand in SUBCOMMANDS:
        in_help = help_options(run_help(binary, *subcommand.split()))
        own, shared = pages[subcommand]
        documented = dict(own)
        for flag, line in shared.items():
            if flag not in serve_page:
                problems.append(f"{path}:{line}: {subcommand} shares {flag} with serve, which documents no {flag}")
            else:
                documented[flag] = serve_page[flag]
        total += len(in_help)
        for flag, (variable, default) in sorted(in_help.items()):
            if flag not in documented:
                problems.append(f"`{subcommand} --help` lists {flag} ({variable or 'no variable'}), {path} does not")
                continue
            doc_variable, doc_default, line = documented[flag]
            if doc_variable != variable:
                problems.append(f"{path}:{line}: {subcommand} {flag}: variable {doc_variable} here, {variable} in --help")
            if doc_default != default:
                problems.append(f"{path}:{line}: {subcommand} {flag}: default {doc_default!r} here, {default!r} in --help")
        for flag, (_, _, line) in sorted(documented.items(), key=lambda item: item[1][2]):
            if flag not in in_help:
                problems.append(f"{path}:{line}: documents {subcommand} {flag}, which `{subcommand} --help` does not list")
    assert not problems, "\n  " + "\n  ".join(problems)
    return f"{total} options of {', '.join(SUBCOMMANDS)} match {path}"


# MARK: metrics

METRIC_CATALOGUE = "Sources/ProfileService/Observability/MetricFamily.swift"
# The swift-metrics type that creates each kind of family.
METRIC_CREATORS = {"counter": {"Counter", "SampledCounter"}, "gauge": {"Gauge"}, "histogram": {"Timer"}}


def catalogue_metrics():
    """{family: (kind, [labels], member)} of the catalogue, MetricFamily.all."""
    text = read(METRIC_CATALOGUE)
    pattern = r'static let (\w+) = MetricFamily\(\s*"([a-z_:][a-z0-9_:]*)", \.(\w+)(?:, labels: \[([^\]]*)\])?'
    families = {}
    for member, name, kind, labels in re.findall(pattern, text):
        assert name not in families, f"{METRIC_CATALOGUE}: {name} declared twice"
        families[name] = (kind, re.findall(r'"(\w+)"', labels or ""), member)
    listed = re.search(r"static let all: \[MetricFamily\] = \[(.*?)\]", text, re.S).group(1)
    members = {member for (_, _, member) in families.values()}
    missing = members - set(re.findall(r"\w+", listed))
    assert not missing, f"{METRIC_CATALOGUE}: MetricFamily.all lacks {sorted(missing)}"
    return families


def source_metric_uses():
    """Problems with how the service's sources create metrics: every metric goes through the
    catalogue (no name spelled out), with the swift-metrics type of its declared kind."""
    families = {member: (name, kind) for name, (kind, _, member) in catalogue_metrics().items()}
    problems = []
    for directory, _, names in os.walk(os.path.join(ROOT, "Sources")):
        relative = os.path.relpath(directory, ROOT)
        for name in names:
            if not name.endswith(".swift") or relative.startswith(("Sources/TestSupport", "Sources/ProfileServiceTesting")):
                continue
            path = os.path.join(relative, name)
            text = re.sub(r"//[^\n]*", "", read(path))
            for match in re.finditer(r"\b(?:Metrics\.)?(Counter|FloatingPointCounter|Gauge|Meter|Timer|Recorder)\(\s*label:\s*\"", text):
                problems.append(f"{path}: {match.group(0)}...: name the family through MetricFamily, not a string")
            uses = r"\b(?:Metrics\.)?(\w+)\(\s*label:\s*MetricFamily\.(\w+)\.name|\b(SampledCounter)\(\.(\w+)\)"
            for match in re.finditer(uses, text):
                creator, member = (match.group(1), match.group(2)) if match.group(1) else (match.group(3), match.group(4))
                if member not in families:
                    problems.append(f"{path}: MetricFamily.{member} is not declared")
                elif creator not in METRIC_CREATORS[families[member][1]]:
                    problems.append(f"{path}: {families[member][0]} is a {families[member][1]}, created as {creator}")
    return problems


def source_label_values():
    """{family: {values}} of the `event` labels the sources spell out."""
    cache = read("Sources/ProfileService/Cache/CacheStatistics.swift")
    body = cache[cache.index("var metricName"):]
    body = body[:body.index("\n    }\n")]
    breaker = read("Sources/ProfileService/Cache/NodeCircuitBreaker.swift")
    breaker_enum = re.search(r"enum Event: String[^{]*\{(.*?)\n    \}", breaker, re.S).group(1)
    return {
        "profile_service_cache_events_total": set(re.findall(r"case \.\w+: \"(\w+)\"", body)),
        "profile_service_memcached_breaker_events_total": set(re.findall(r"^\s*case (\w+)\s*$", breaker_enum, re.M)),
    }


def documented_metrics(path="docs/metrics.md"):
    """{family: (type, labels, row text, line)} of the metrics reference's table."""
    text = read(path)
    rows = {}
    for number, line in enumerate(text.split("\n"), start=1):
        row = re.match(r"^\| `([a-z_:][a-z0-9_:]*)` \| (\w+) \|([^|]*)\|", line)
        if row:
            assert row.group(1) not in rows, f"{path}:{number}: {row.group(1)} listed twice"
            rows[row.group(1)] = (row.group(2), re.findall(r"`(\w+)`", row.group(3)), line, number)
    return rows


def check_metrics():
    path = "docs/metrics.md"
    in_catalogue = catalogue_metrics()
    documented = documented_metrics(path)
    assert len(in_catalogue) > 30, f"found only {len(in_catalogue)} families in {METRIC_CATALOGUE}: is the pattern stale?"
    problems = source_metric_uses()
    for family, (kind, labels, _) in sorted(in_catalogue.items()):
        if family not in documented:
            problems.append(f"the service exports {family} ({kind}); {path} does not list it")
            continue
        documented_kind, documented_labels, _, line = documented[family]
        if documented_kind != kind:
            problems.append(f"{path}:{line}: {family} is a {documented_kind} here, a {kind} in {METRIC_CATALOGUE}")
        if documented_labels != labels:
            problems.append(f"{path}:{line}: {family} has labels {documented_labels} here, {labels} in {METRIC_CATALOGUE}")
    for family, (_, _, _, line) in sorted(documented.items()):
        if family not in in_catalogue:
            problems.append(f"{path}:{line}: lists {family}, which {METRIC_CATALOGUE} does not declare")
    for family, values in source_label_values().items():
        row = documented.get(family, (None, [], "", 0))[2]
        missing = sorted(v for v in values if f"`{v}`" not in row)
        if missing:
            problems.append(f"{path}: the row of {family} lacks the label values {', '.join(missing)}")
    assert not problems, "\n  " + "\n  ".join(problems)
    return f"{len(in_catalogue)} metric families of {METRIC_CATALOGUE} match {path} and the sources"



# MARK: commands

def openapi_routes():
    """[(regex of the path, {methods})] of openapi.yaml, read without a YAML parser."""
    routes, current = [], None
    for line in read("openapi.yaml").split("\n"):
        path = re.match(r"^  (/\S*):\s*$", line)
        if path:
            pattern = "^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(path.group(1))) + "$"
            current = (pattern, set())
            routes.append(current)
        elif re.match(r"^\S", line):
            current = None if not line.startswith("paths:") else current
        elif current is not None:
            method = re.match(r"^    (get|put|post|delete|patch|head|options):\s*$", line)
            if method:
                current[1].add(method.group(1).upper())
    return routes


def script_subcommands(path):
    """The subcommands and --options a script takes: for a shell script the words of its `case`
    branches, for a Python one the options it declares to argparse (empty: nothing to check)."""
    text = read(path)
    if path.endswith(".py"):
        return set(re.findall(r"add_argument\(\s*\"(--[a-z-]+)\"", text))
    words = set(re.findall(r"^    ([a-z][a-z-]*(?:\|[a-z-]+)*)\)", text, re.M))
    result = set()
    for word in words:
        result.update(word.split("|"))
    result.update(re.findall(r"^\s+(--[a-z-]+)\)", text, re.M))
    # Options a script passes on (test.sh's --filter) are named in its header's usage lines.
    result.update(re.findall(r"^#\s+scripts/\S+\s+(--[a-z-]+)", text, re.M))
    return result


def swift_products():
    package = read("Package.swift")
    return set(re.findall(r"\.executable\(name: \"([^\"]+)\"", package)) | set(
        re.findall(r"\.executableTarget\(\s*name: \"([^\"]+)\"", package))


def command_lines(path):
    """(line number, command text) of the shell in a Markdown file: sh/bash/console blocks, and
    inline code that starts with scripts/ or a binary's path."""
    text = read(path)
    commands = []
    for language, first, lines in fenced_blocks(text):
        if language not in ("sh", "bash", "shell", "console"):
            continue
        joined, start = "", None
        for offset, line in enumerate(lines):
            if language == "console":
                if not line.startswith("$ "):
                    continue
                line = line[2:]
            if start is None:
                start = first + offset
            if line.rstrip().endswith("\\"):
                joined += line.rstrip()[:-1] + " "
                continue
            joined += line
            if joined.strip() and not joined.strip().startswith("#"):
                commands.append((start, joined))
            joined, start = "", None
    for number, line in enumerate(text.split("\n"), 1):
        for code in re.findall(r"(?<!`)`([^`]+)`(?!`)", line):
            if re.match(r"^(scripts/|\.build/release/|\.build/debug/|profilectl |profile-service )", code):
                commands.append((number, code))
    return commands


def command_substitutions(line):
    """The line with each `$(…)` replaced by a placeholder, and the commands inside them
    (quotes and nested parentheses respected; `$((…))` arithmetic left alone)."""
    outer, inner, index = "", [], 0
    while index < len(line):
        if line.startswith("$(", index) and not line.startswith("$((", index):
            depth, quote, end = 1, None, index + 2
            while end < len(line) and depth:
                char = line[end]
                if quote:
                    if char == quote:
                        quote = None
                    elif char == "\\" and quote == '"':
                        end += 1
                elif char in "'\"":
                    quote = char
                elif char == "\\":
                    end += 1
                elif char == "(":
                    depth += 1
                elif char == ")":
                    depth -= 1
                end += 1
            body = line[index + 2:end - 1]
            rest, nested = command_substitutions(body)
            inner += [rest, *nested]
            outer += "SUBSTITUTION"
            index = end
        else:
            outer += line[index]
            index += 1
    return outer, inner


def split_commands(line):
    """The simple commands of a shell line, `$(…)` substitutions included, as token lists."""
    line, substitutions = command_substitutions(line)
    result = []
    for part in [line, *substitutions]:
        try:
            tokens = shlex.split(part, comments=True)
        except ValueError:
            tokens = part.split()
        current = []
        for token in tokens:
            if token in ("&&", "||", "|", ";", "&"):
                result.append(current)
                current = []
            elif token.endswith(";") or token.endswith("&") and not token.endswith("&&"):
                current.append(token.rstrip(";&"))
                result.append(current)
                current = []
            else:
                current.append(token)
        result.append(current)
    return [c for c in result if c]


def check_binary_arguments(where, name, subcommand, arguments, helps):
    problems = []
    if subcommand not in helps and arguments and f"{subcommand} {arguments[0]}" in helps:
        subcommand, arguments = f"{subcommand} {arguments[0]}", arguments[1:]  # `cache-cluster list`
    if subcommand not in helps:
        return [f"{where}: {name} has no subcommand {subcommand!r}"]
    known = set(helps[subcommand]) | {"--help"}
    for argument in arguments:
        if argument.startswith("--"):
            flag = argument.split("=")[0]
            negated = re.sub(r"^--no-", "--", flag)
            if flag not in known and negated not in known:
                problems.append(f"{where}: `{name} {subcommand}` has no option {flag}")
    return problems


def check_commands(binary):
    routes = openapi_routes()
    products = swift_products()
    service_helps = {s: help_options(run_help(binary, *s.split())) for s in SUBCOMMANDS}
    service_helps["api-contract"] = {}
    candidates = [os.path.join(os.path.dirname(binary), "profilectl")] + [
        os.path.join(ROOT, ".build", kind, "profilectl") for kind in ("debug", "release")]
    ctl = next((c for c in candidates if os.access(c, os.X_OK)), candidates[0])
    ctl_helps = {s: help_options(run_help(ctl, s)) for s in ("get", "put", "patch", "delete", "watch", "export")}
    problems, checked = [], 0
    for path in COMMAND_FILES:
        for number, line in command_lines(path):
            where = f"{path}:{number}"
            for command in split_commands(line):
                while command and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", command[0]):
                    command = command[1:]  # VAR=value before the command
                if not command:
                    continue
                program, arguments = command[0], command[1:]
                checked += 1
                if program.startswith("scripts/"):
                    if os.path.isdir(os.path.join(ROOT, program)):
                        continue
                    if not os.path.isfile(os.path.join(ROOT, program)):
                        problems.append(f"{where}: no file {program}")
                        continue
                    if program.endswith(".sh") and not os.access(os.path.join(ROOT, program), os.X_OK):
                        problems.append(f"{where}: {program} is not executable")
                        continue
                    if program == "scripts/run.sh":
                        problems += check_binary_arguments(where, "profile-service", "serve", arguments, service_helps)
                        continue
                    known = script_subcommands(program)
                    for argument in arguments:
                        if (argument.startswith("--") or re.match(r"^[a-z][a-z-]+$", argument)) and known:
                            if argument.split("=")[0] not in known and argument not in ("NAME",):
                                problems.append(f"{where}: {program} knows no {argument}")
                            break  # only the first word is a subcommand; the rest are its arguments
                elif re.match(r"^(\.build/(release|debug)/)?profile-service$", program):
                    if arguments:
                        problems += check_binary_arguments(where, "profile-service", arguments[0], arguments[1:], service_helps)
                elif re.match(r"^(\.build/(release|debug)/)?profilectl$", program):
                    if arguments:
                        problems += check_binary_arguments(where, "profilectl", arguments[0], arguments[1:], ctl_helps)
                elif program == "swift" and "--product" in arguments:
                    product = arguments[arguments.index("--product") + 1]
                    if product not in products:
                        problems.append(f"{where}: Package.swift has no product {product}")
                elif program == "curl":
                    problems += check_curl(where, arguments, routes)
                else:
                    checked -= 1
    assert not problems, "\n  " + "\n  ".join(problems)
    return f"{checked} commands in {', '.join(COMMAND_FILES)}"


def check_curl(where, arguments, routes):
    method, url, index = None, None, 0
    while index < len(arguments):
        argument = arguments[index]
        if argument in ("-X", "--request"):
            method = arguments[index + 1].upper()
            index += 2
            continue
        if argument in ("-I", "--head"):
            method = "HEAD"
        elif argument in ("-H", "-d", "--data", "--data-binary", "-o", "-w", "-u"):
            index += 2
            continue
        elif not argument.startswith("-") and url is None:
            url = argument
        index += 1
    if url is None:
        return [f"{where}: a curl line without a URL"]
    if method is None:
        method = "GET"
    match = re.match(r"^(?:https?://)?(?:localhost|127\.0\.0\.1|\[::1\])(?::\d+)?(/[^?#]*)?", url)
    if not match:
        return []  # another host: nothing to check here
    path = match.group(1) or "/"
    path = re.sub(r"\$\{?\w+\}?", "1", path)
    for pattern, methods in routes:
        if re.match(pattern, path):
            return [] if method in methods else [f"{where}: {method} {path}: openapi.yaml allows only {sorted(methods)}"]
    return [f"{where}: {path} is not a path of openapi.yaml"]


# MARK: history

def check_history():
    problems, files = [], 0
    for path in markdown_files():
        if path in HISTORY_EXEMPT:
            continue
        files += 1
        for number, line in enumerate(strip_code(read(path)), 1):
            prose = re.sub(r"\]\([^)]*\)", "]", line)  # link targets are not prose
            for pattern, what in HISTORY_PATTERNS:
                for match in re.finditer(pattern, prose, re.I):
                    problems.append(f"{path}:{number}: {what}: {match.group(0)!r} (history goes to CHANGELOG.md)")
    assert not problems, "\n  " + "\n  ".join(problems)
    exempt = "; ".join(f"{p}: {why}" for p, why in HISTORY_EXEMPT.items())
    return f"{files} files free of the project's history (not checked: {exempt})"


def main():
    parser = argparse.ArgumentParser(description="Checks that keep the documentation true.")
    parser.add_argument("--binary", default=os.environ.get("PROFILE_SERVICE_BIN", os.path.join(ROOT, ".build/debug/profile-service")),
                        help="the built profile-service (default: $PROFILE_SERVICE_BIN or .build/debug/profile-service)")
    parser.add_argument("checks", nargs="*", metavar="CHECK",
                        help="only these of links, flags, metrics, commands, history (default: all)")
    arguments = parser.parse_args()
    binary = os.path.abspath(arguments.binary)
    checks = [
        ("links", check_links),
        ("flags", lambda: check_flags(binary)),
        ("metrics", check_metrics),
        ("commands", lambda: check_commands(binary)),
        ("history", check_history),
    ]
    unknown = set(arguments.checks) - {name for name, _ in checks}
    if unknown:
        parser.error(f"no check {', '.join(sorted(unknown))}")
    failed = 0
    for name, check in checks:
        if arguments.checks and name not in arguments.checks:
            continue
        try:
            summary = check()
        except AssertionError as error:
            failed += 1
            print(f"FAIL  {name}: {error}")
        else:
            print(f"ok    {name}: {summary}")
    print(f"docs checks: {'all passed' if not failed else f'{failed} failed'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
