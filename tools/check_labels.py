#!/usr/bin/env python3
"""check_labels.py — every invariant label names one thing in the project.

A label is a prefix and a number, "(E1)", "AD3", "P-T7": a comment that
cites it must name one list, one place, and a claim that list states. So
each prefix has ONE home (the table REGISTRY below: a file, a directory, or
a document), a label is defined once, and a label is cited only when its
list defines it. The check fails, naming file and line, when

  - a label is defined twice (both places are named);
  - a list is defined outside its prefix's home, or under a prefix the
    registry does not hold (a new list registers its prefix here);
  - a comment, string or document cites a label no list defines (a stale
    number, a range past the list's end, a prefix that moved: RETIRED
    says where its lists went);
  - a document restating a list (RESTATED) holds a label its home does not.

What counts as a DEFINITION:
  - C and headers: a comment line whose text, after its leading '*' or
    '//', is two to four spaces, the label, white space and more text:
        " *   AD1 ALREADY_ADMITTED only when ..."
    (the invariant lists at the top of the files; " * AD1 is ..." with one
    space is prose that cites it, and so is a continuation line indented
    deeper than four).
  - Markdown: a list item that opens with the label in bold or followed by
    a colon: "- **P-T7** ...", "- T2: ...".

What counts as a CITATION (the recognisable form; nothing else is read):
  - a registered or retired prefix followed by a number 1..99 without a
    leading zero, standing alone: not inside a longer word or identifier
    (SHA256, T0417, UTF8, HS256, OP2, EU1, X-macro are not labels;
    neither is a number with a leading zero or of three digits);
  - only in the comments and string literals of C files and headers, in
    the '#' comments of shell, Python and Meson files, and in the text of
    the Markdown documents outside `code spans`; C code itself is not read
    (a macro named E10 is no citation);
  - a range "X1-X5", "X1–X5" or "X1..X5" cites every label from X1 to X5;
  - NOT_LABELS are words of that form that are no labels: the C
    standards (C89 ... C23) and the latency percentiles (P50 ... P99);
  - a label of a prefix the registry does not know is read only where a
    label alone stands: after '(', ', ' or '; ', or opening a comment,
    and before ')', ',', ';', ':' or the comment's end ("(ZZ3)",
    "/* ZZ3: ..."). It fails: no list has that prefix.

Standard library only. Usage:
    check_labels.py [--root DIR] [--stamp FILE]
--stamp writes FILE when the check passes (the build's custom_target).
"""

import argparse
import os
import re
import sys

# prefix: (its home, the list). A home ending in '/' is a directory: the
# files directly in it (not its subdirectories) may define the prefix's
# labels. The store's prefixes are the store's to arrange
# (lib/store/, include/oncegate/store.h and payout_store.h).
REGISTRY = {
    # the documents
    'P': ('docs/payouts.md', "the payout design's invariants"),
    'P-T': ('docs/payouts.md', 'the payout claims the tests prove '
            '(section 8)'),
    'A-T': ('docs/design.md', 'the admission claims the tests prove '
            '("What the tests prove")'),
    'RF': ('docs/design.md', 'the refusal cache of `oncegate serve` ("The '
           'refusal cache")'),
    'KA': ('docs/design.md', 'kept-alive provider connections: why a '
           're-send is one request'),
    'R': ('docs/config.md', "the configuration's relations beyond the "
          'timings (generated from src/serve/config.c)'),
    # core: pure logic
    'T': ('lib/core/timings.c', 'the timing relations'),
    'AD': ('lib/core/admission.c', "the admission's decision on a claim"),
    'SE': ('lib/core/storeerr.c', 'what a store failure means'),
    'CT': ('lib/core/classify.c', "what a provider's classification table "
           'may say'),
    'E': ('lib/core/execute.c', "what a create call's answer means"),
    'RV': ('lib/core/execute.c', "recovery's decisions after a lookup"),
    'SW': ('lib/core/execute.c', "the payout sweeper's decisions after a "
           'takeover'),
    'RC': ('lib/core/execute.c', "the payout reconciler's decisions after "
           'a lookup'),
    'RD': ('lib/core/redeem.c', "a redemption's decisions and sealing"),
    'PC': ('lib/core/payout.c', 'the pure payout core: amounts, terms, '
           'the policy'),
    # token
    'K': ('lib/token/keys.c', 'keysets and signers'),
    'F': ('lib/token/keyfile.c', 'key files'),
    'V': ('lib/token/grant.c', 'the grant validator'),
    'OI': ('lib/token/opid.c', 'server-issued operation ids and their '
           'MAC'),
    # the store (the store helper's lists)
    'M': ('lib/store/store_int.h', "the store method contract: what every "
          "backend's methods guarantee"),
    'S': ('lib/store/', "the store's dispatch above the backends"),
    'PL': ('lib/store/pool.c', 'the connection pool'),
    'PP': ('lib/store/payout_plan.c', 'the pure payout plans'),
    'Q': ('lib/store/sqlite/', 'what the SQLite backend guarantees, and how'),
    'G': ('lib/store/sqlite/admit.c', "SQLite's group commit"),
    'I': ('lib/store/postgres/', 'what the PostgreSQL backend guarantees, '
          'and how'),
    'B': ('lib/store/postgres/admit_batch.c', "PostgreSQL's group commit "
          'of admissions'),
    'GQ': ('lib/store/batcher.c', "group commit's waiter queue, shared by "
           'the backends'),
    'CB': ('lib/store/postgres/consume_batch.c', "PostgreSQL's group "
           'commit of the consume verdict'),
    'OB': ('lib/store/postgres/outcome_batch.c', "PostgreSQL's group "
           'commit of outcomes'),
    'BR': ('lib/store/postgres/batch_run.c', "PostgreSQL's batched "
           'statements, every kind alike: run, fall back, count'),
    'RB': ('lib/store/postgres/rotate_batch.c', "PostgreSQL's group "
           'commit of ticket rotations'),
    # provider, exec
    'CL': ('lib/provider/client.c', 'the provider client'),
    'EX': ('lib/exec/execute.c', 'one create and its record (the drive)'),
    'RX': ('lib/exec/redeem.c', 'a redemption: exchange, persist, catch up'),
    'PX': ('lib/exec/payout.c', 'the payout worker, sweeper and '
           'reconciler'),
    # serve
    'CF': ('src/serve/config_load.c', 'loading the configuration'),
    'D': ('src/serve/dev.c', 'dev mode'),
    'DS': ('src/serve/dev_payouts.c', "dev mode's payout scenario"),
    'W': ('src/serve/wire.h', 'HTTP/1.1 request framing (RFC 9112)'),
    'HE': ('src/serve/edge.c', "the HTTP edge's connections: early "
           'refusals, deadlines, caps'),
    'RL': ('src/serve/ratelimit.h', "the edge's token buckets"),
    'OC': ('src/serve/console.c', 'the operator console'),
    # the sandbox provider
    'SC': ('src/sandbox/core.c', "the sandbox's requests and decisions"),
    'SB': ('src/sandbox/store.c', "the sandbox's store"),
    'SL': ('src/sandbox/log.c', "the sandbox's log"),
}

# (file, prefix): why that file may restate a list defined at its home. A
# restated label must be one its home defines.
RESTATED = {
    ('docs/config.md', 'T'): 'generated by `oncegate serve --config-doc`: '
                              'the timing relations lib/core/timings.c '
                              'checks, for the operator',
}

# Prefixes no list has any more, and where their lists went: a citation of
# one is stale.
RETIRED = {
    'C': 'AD (lib/core/admission.c), CL (lib/provider/client.c), '
         'SC (src/sandbox/core.c), CF (src/serve/config_load.c)',
    'L': 'SL (src/sandbox/log.c)',
    'X': 'RX (lib/exec/redeem.c)',
}

# Words of the citation form that are no labels: the C standards, and the
# latency percentiles a benchmark reports.
NOT_LABELS = {'C89', 'C99', 'C11', 'C17', 'C23', 'P50', 'P90', 'P95', 'P99'}

# The trees read, and the files of them that are not.
TREES = ('include', 'lib', 'src', 'tests', 'fuzz', 'bench', 'tools',
         'scripts', 'docs', 'providers', '.ci')
TOP_FILES = ('meson.build', 'meson_options.txt', 'README.md')
SKIP_DIRS = ('corpus', 'vectors', 'fixtures', 'node_modules')
SELF = 'tools/check_labels.py'  # holds the registry: every prefix by name

C_SUFFIXES = ('.c', '.h', '.inc')
HASH_SUFFIXES = ('.sh', '.py', '.build', '.txt')
MD_SUFFIXES = ('.md',)

NUMBER = r'([1-9][0-9]?)'
LABEL = r'(?P<p>[A-Z]-T|[A-Z]{1,3})(?P<n>[1-9][0-9]?)'
COMMENT_LEADER = re.compile(r'^\s*(?:/\*+|\*+|//+)')
C_DEFINITION = re.compile(r'^\s{2,4}' + LABEL + r'\s+\S')
MD_DEFINITION = re.compile(r'^\s*[-*]\s+(?:\*\*)?' + LABEL +
                           r'(?:\*\*\s|:\s)')
CODE_SPAN = re.compile(r'`[^`\n]*`')
# A label of any prefix where only a label stands: after '(', '; ' or ', ',
# or opening a comment, and followed by ')', ',', ';', ':' or the comment's
# end. Of an unknown prefix it is a list nobody registered, or a typo.
CITE_SHAPED = re.compile(r'(?:\(|^\s*(?:/\*+|\*|//)\s*|; |, )'
                         r'([A-Z]{1,3})([1-9][0-9]?)(?=[),;:]|\s*\*/)')


def citation_re():
    names = sorted(set(REGISTRY) | set(RETIRED), key=lambda p: (-len(p), p))
    pfx = '(' + '|'.join(re.escape(p) for p in names) + ')'
    return re.compile(r'(?<![A-Za-z0-9_\-])' + pfx + NUMBER +
                      r'(?:\s*(?:-|–|—|\.\.)\s*' + pfx + NUMBER + r')?' +
                      r'(?![A-Za-z0-9_])')


def kind_of(rel):
    base = os.path.basename(rel)
    if rel.endswith(C_SUFFIXES):
        return 'c'
    if rel.endswith(MD_SUFFIXES):
        return 'md'
    if rel.endswith(HASH_SUFFIXES) or base == 'meson.build':
        return 'hash'
    if '.' not in base and (rel.startswith(('scripts/', 'bench/', '.ci/'))):
        return 'hash'
    return None


def files_of(root):
    for rel in TOP_FILES:
        if os.path.isfile(os.path.join(root, rel)):
            yield rel
    for tree in TREES:
        for d, dirs, files in os.walk(os.path.join(root, tree)):
            dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS)
            for f in sorted(files):
                rel = os.path.relpath(os.path.join(d, f), root)
                if rel != SELF and kind_of(rel):
                    yield rel


def c_texts(src):
    """The comments and string literals of C text src: (kind, line, text)
    for each line of each, kind 'comment' or 'string'."""
    out, i, n, line = [], 0, len(src), 1

    def emit(kind, start_line, text):
        for k, piece in enumerate(text.split('\n')):
            out.append((kind, start_line + k, piece))

    while i < n:
        c = src[i]
        if c == '\n':
            line += 1
            i += 1
        elif src.startswith('/*', i):
            j = src.find('*/', i + 2)
            j = n if j < 0 else j + 2
            emit('comment', line, src[i:j])
            line += src.count('\n', i, j)
            i = j
        elif src.startswith('//', i):
            j = src.find('\n', i)
            j = n if j < 0 else j
            emit('comment', line, src[i:j])
            i = j
        elif c in '"\'':
            j = i + 1
            while j < n and src[j] != c and src[j] != '\n':
                j += 2 if src[j] == '\\' else 1
            if c == '"':
                emit('string', line, src[i + 1:j])
            i = j + 1
        else:
            i += 1
    return out


def scan(root, rel, cite):
    """(definitions, citations, unknown) of one file: definitions as (line,
    prefix, number), citations as (line, prefix, first, last, text), and
    the labels of unknown prefixes in a citation's place as (line, label)."""
    with open(os.path.join(root, rel), encoding='utf-8') as f:
        src = f.read()
    kind = kind_of(rel)
    if kind == 'c':
        texts = c_texts(src)
    elif kind == 'md':
        texts = [('md', k, CODE_SPAN.sub('', t))
                 for k, t in enumerate(src.split('\n'), 1)]
    else:
        texts = []
        for k, t in enumerate(src.split('\n'), 1):
            h = t.find('#')
            if h >= 0:
                texts.append(('hash', k, t[h:]))
    defs, cites, unknown = [], [], []
    for how, lineno, text in texts:
        for u in CITE_SHAPED.finditer(text):
            if u.group(1) not in REGISTRY and u.group(1) not in RETIRED:
                unknown.append((lineno, u.group(1) + u.group(2)))
        m, body = None, text
        if how == 'comment':
            body = COMMENT_LEADER.sub('', text, count=1)
            m = C_DEFINITION.match(body)
        elif how == 'md':
            m = MD_DEFINITION.match(text)
        skip = 0
        if m:
            p, num = m.group('p'), m.group('n')
            defs.append((lineno, p, int(num)))
            skip = m.end('n')
        for c in cite.finditer(body, skip):
            p1, n1, p2, n2 = c.group(1), int(c.group(2)), c.group(3), \
                c.group(4)
            if p2 is None:
                if p1 + c.group(2) not in NOT_LABELS:
                    cites.append((lineno, p1, n1, n1, c.group(0)))
            else:
                cites.append((lineno, p1, n1, int(n2),
                              c.group(0) if p1 == p2 else None))
    return defs, cites, unknown


def under(rel, home):
    if home.endswith('/'):
        return os.path.dirname(rel) + '/' == home
    return rel == home


def check(root):
    errors, cite = [], citation_re()
    for p, (home, _) in REGISTRY.items():
        if not os.path.exists(os.path.join(root, home)):
            errors.append('%s: REGISTRY gives prefix %s this home, which is '
                          'no file or directory of the tree' % (home, p))
    defined, restated, citations, n_files = {}, [], [], 0
    for rel in files_of(root):
        n_files += 1
        defs, cites, unknown = scan(root, rel, cite)
        for lineno, label in unknown:
            errors.append('%s:%d: cites %s, but no list has that prefix: '
                          'register its list in REGISTRY of %s, or write '
                          'it so it does not read as a label' %
                          (rel, lineno, label, SELF))
        for lineno, p, num in defs:
            where = '%s:%d' % (rel, lineno)
            label = '%s%d' % (p, num)
            if p not in REGISTRY:
                moved = (', which moved to ' + RETIRED[p]) if p in RETIRED \
                    else ''
                errors.append('%s: defines %s, but no list has prefix %s%s: '
                              'register the list in REGISTRY of %s (a '
                              'prefix no other list uses)' %
                              (where, label, p, moved, SELF))
            elif (rel, p) in RESTATED:
                restated.append((where, p, num))
            elif not under(rel, REGISTRY[p][0]):
                errors.append('%s: defines %s outside its home: prefix %s '
                              'is %s (%s); give this list its own prefix' %
                              (where, label, p, REGISTRY[p][1],
                               REGISTRY[p][0]))
            elif (p, num) in defined:
                errors.append('%s: defines %s again: it is defined at %s '
                              '(one label, one claim)' %
                              (where, label, defined[(p, num)]))
            else:
                defined[(p, num)] = where
        citations.extend((rel, c) for c in cites)
    for where, p, num in restated:
        if (p, num) not in defined:
            errors.append('%s: restates %s%d, which %s does not define' %
                          (where, p, num, REGISTRY[p][0]))
    n_cites = 0
    for rel, (lineno, p, first, last, text) in citations:
        where = '%s:%d' % (rel, lineno)
        n_cites += 1
        if text is None:
            errors.append('%s: a range that spans two lists' % where)
            continue
        if p in RETIRED:
            errors.append('%s: cites %s, but prefix %s names no list any '
                          'more: its lists are now %s' %
                          (where, text, p, RETIRED[p]))
            continue
        if first > last:
            errors.append('%s: cites the range %s, which runs backwards' %
                          (where, text))
            continue
        missing = ['%s%d' % (p, k) for k in range(first, last + 1)
                   if (p, k) not in defined]
        if missing:
            errors.append('%s: cites %s, but %s defines no %s (%s: %s)' %
                          (where, text, REGISTRY[p][0], ', '.join(missing),
                           p, REGISTRY[p][1]))
    return errors, len(defined), n_cites, n_files


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--root', default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), '..'))
    ap.add_argument('--stamp')
    args = ap.parse_args()
    root = os.path.normpath(args.root)
    errors, n_defs, n_cites, n_files = check(root)
    if errors:
        for e in errors:
            print(e, file=sys.stderr)
        print('check_labels: %d violation%s: each label is defined once, in '
              'its prefix\'s home, and cited only as defined (%s)' %
              (len(errors), '' if len(errors) == 1 else 's', SELF),
              file=sys.stderr)
        return 1
    print('check_labels: %d prefixes, %d labels each defined once at its '
          'home, %d citations in %d files, each naming a defined label' %
          (len(REGISTRY), n_defs, n_cites, n_files))
    if args.stamp:
        with open(args.stamp, 'w', encoding='utf-8') as f:
            f.write('labels checked\n')
    return 0


if __name__ == '__main__':
    sys.exit(main())
