#!/usr/bin/env python3
"""check_layers.py — oncegate's layers depend one way, and this says so.

Every C file and header of lib/, src/, include/, fuzz/, bench/ and tests/
belongs to one layer (the table PLACES below). A layer stands on the layers
it USES, and on theirs in turn; a file may include a header of its own
layer or of a layer it stands on, and nothing else:

    core      pure: validation, policy, classification, timings; no I/O
    token     keys, JWS, grant tokens and their validator     uses core
    store     the store above the backends, the backends      uses token
    provider  the provider client (libcurl)                   uses core
    exec      execution, recovery, redemption                 uses store,
                                                                   provider
    api       include/oncegate/oncegate.h, which includes     uses exec
              every public header
    common    what the oncegate command's subcommands share   uses core
    serve     oncegate serve (src/serve/)                      uses api,
                                                                   common
    cli       the oncegate command (src/cli/)                 uses serve
    sandbox   oncegate-sandbox: stands alone                  uses nothing
    bench     benchmark helpers                               uses api
    fuzz      libFuzzer targets (see every layer's insides)   uses serve
    tests     the tests (see every layer's insides)           uses cli,
                                                                   sandbox

A layer may also name the only headers it shows the layers above it
(EXPORTS): cli sees serve through src/serve/commands.h alone. fuzz and tests
see every header of the layers they stand on. And a backend's own header
(#include <libpq-fe.h>, ...) belongs to the layers that talk to that backend
(BACKEND_HEADERS): the core, for one, includes none.

The check fails, naming file and line, when a file includes a header of a
layer it does not stand on, or a backend's header its layer may not use, when an include cannot be resolved or resolves
two ways, when a file or header has no layer (a new directory or public
header is placed deliberately, in PLACES), and when headers include each
other in a cycle. When it passes it prints how many files each layer holds.

Standard library only. Usage:
    check_layers.py [--root DIR] [--stamp FILE]
--stamp writes FILE when the check passes (the build's custom_target).
"""

import argparse
import os
import re
import sys

# name: (the layers it uses, what it is)
LAYERS = {
    'core': ((), 'pure: validation, policy, classification, timings'),
    'token': (('core',), 'keys, JWS, grant tokens, the validator'),
    'store': (('token',), 'the store and its backends'),
    'provider': (('core',), 'the provider client'),
    'exec': (('store', 'provider'), 'execution, recovery, redemption'),
    'api': (('exec',), 'oncegate.h: every public header'),
    'common': (('core',), "the oncegate command's shared pieces"),
    'serve': (('api', 'common'), 'oncegate serve'),
    'cli': (('serve',), 'the oncegate command'),
    'sandbox': ((), 'oncegate-sandbox, standalone'),
    'bench': (('api',), 'benchmark helpers'),
    'fuzz': (('serve',), 'libFuzzer targets'),
    'tests': (('cli', 'sandbox'), 'the tests'),
}

# The headers a layer shows the layers above it; a layer not named here
# shows all of its headers.
EXPORTS = {
    'serve': ('src/serve/commands.h',),
}

# Layers that see every header of the layers they stand on, EXPORTS aside.
WHITEBOX = ('fuzz', 'tests')

# The headers of the engines and services oncegate talks to, and the only
# layers that may include each: the store speaks to PostgreSQL, the provider
# client (and the demo, a client of oncegate serve) over libcurl, the
# sandbox serves HTTP with libmicrohttpd (serve frames HTTP itself:
# src/serve/wire.c, README.md).
BACKEND_HEADERS = {
    'libpq-fe.h': ('store', 'tests'),
    'curl/curl.h': ('provider', 'cli', 'tests'),
    'microhttpd.h': ('sandbox', 'tests'),
    'sqlite3.h': ('store', 'sandbox', 'bench', 'tests'),
}

# Where each file belongs: a directory (ending in '/': the files directly
# in it, not its subdirectories) or one file. A file's own entry wins over
# its directory's.
PLACES = {
    'include/oncegate/core.h': 'core',
    'include/oncegate/payout.h': 'core',
    'include/oncegate/classify.h': 'core',
    'include/oncegate/execute.h': 'core',
    'include/oncegate/grant.h': 'token',
    'include/oncegate/store.h': 'store',
    'include/oncegate/payout_store.h': 'store',
    'include/oncegate/provider.h': 'provider',
    'include/oncegate/redeem.h': 'exec',
    'include/oncegate/exec.h': 'exec',
    'include/oncegate/payout_exec.h': 'exec',
    'include/oncegate/oncegate.h': 'api',
    'lib/core/': 'core',
    'lib/token/': 'token',
    'lib/store/': 'store',
    'lib/store/sqlite/': 'store',
    'lib/store/postgres/': 'store',
    'lib/provider/': 'provider',
    'lib/exec/': 'exec',
    'src/common/': 'common',
    'src/serve/': 'serve',
    'src/cli/': 'cli',
    'src/sandbox/': 'sandbox',
    'bench/': 'bench',
    'fuzz/': 'fuzz',
    'tests/': 'tests',
    'tests/support/': 'tests',
    'tests/serve/': 'tests',
    'tests/sandbox/': 'tests',
    'tests/provider/': 'tests',
    'tests/pipeline/': 'tests',
}

# The trees checked, and the kinds of file in them.
TREES = ('include', 'lib', 'src', 'fuzz', 'bench', 'tests')
SUFFIXES = ('.c', '.h', '.inc')

# Where #include "..." looks after the including file's own directory: the
# include_directories of meson.build, fuzz/meson.build and tests/ taken
# together. A name found in two of them is refused as ambiguous.
SEARCH = ('include', 'lib', 'src/common', 'src/serve', 'src/cli', 'tests/support')

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
SYSTEM_INCLUDE = re.compile(r'^\s*#\s*include\s*<([^>]+)>')


def closure(name):
    """The layers name stands on, itself excluded."""
    seen, todo = set(), list(LAYERS[name][0])
    while todo:
        n = todo.pop()
        if n not in seen:
            seen.add(n)
            todo.extend(LAYERS[n][0])
    return seen


def layer_of(rel):
    if rel in PLACES:
        return PLACES[rel]
    return PLACES.get(os.path.dirname(rel) + '/')


def sources(root):
    for tree in TREES:
        for d, dirs, files in os.walk(os.path.join(root, tree)):
            # npm's packages (tests/console) are not ours
            dirs[:] = sorted(x for x in dirs if x != 'node_modules')
            for f in sorted(files):
                if f.endswith(SUFFIXES):
                    yield os.path.relpath(os.path.join(d, f), root)


def resolve(root, rel, name):
    """The file name includes, relative to root: [] when none, several when
    ambiguous."""
    here = os.path.normpath(os.path.join(os.path.dirname(rel), name))
    if os.path.isfile(os.path.join(root, here)):
        return [here]
    found = []
    for d in SEARCH:
        p = os.path.normpath(os.path.join(d, name))
        if os.path.isfile(os.path.join(root, p)) and p not in found:
            found.append(p)
    return found


def cycles(graph):
    """Every cycle among the files of graph (Tarjan's strongly connected
    components; a component of two or more files, or a file that includes
    itself, is a cycle), each as a list of files in include order."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        # Iterative, so a deep include chain cannot exhaust the recursion.
        work = [(v, iter(sorted(graph.get(v, ()))))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        while work:
            node, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on:
                    low[node] = min(low[node], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == node:
                            break
                    if len(comp) > 1 or node in graph.get(node, ()):
                        out.append(path_through(graph, sorted(comp)))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def path_through(graph, comp):
    """A cycle through comp's first file, following includes inside comp."""
    members, start = set(comp), comp[0]
    prev, todo = {start: None}, [start]
    while todo:
        v = todo.pop(0)
        for w in sorted(graph.get(v, ())):
            if w == start:
                path = [v]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                return list(reversed(path)) + [start]
            if w in members and w not in prev:
                prev[w] = v
                todo.append(w)
    return comp


def check(root):
    errors, graph, counts, n_includes = [], {}, {}, 0
    line_of = {}  # (file, included file): the line of the first #include
    for name in LAYERS:
        for used in LAYERS[name][0]:
            if used not in LAYERS:
                errors.append('check_layers.py: layer %s uses unknown layer '
                              '%s' % (name, used))
    for name in closure_safe_names():
        if name in closure(name):
            errors.append('check_layers.py: layer %s stands on itself' % name)
    files = list(sources(root))
    for rel in files:
        own = layer_of(rel)
        if own is None:
            errors.append('%s: has no layer: place its directory (or, for a '
                          'public header, the file) in PLACES of '
                          'tools/check_layers.py' % rel)
            continue
        counts[own] = counts.get(own, 0) + 1
        below = closure(own)
        graph.setdefault(rel, set())
        with open(os.path.join(root, rel), encoding='utf-8') as f:
            for lineno, line in enumerate(f, 1):
                m = SYSTEM_INCLUDE.match(line)
                if m and m.group(1) in BACKEND_HEADERS and \
                        own not in BACKEND_HEADERS[m.group(1)]:
                    errors.append('%s:%d: includes <%s>, a backend header '
                                  'layer %s may not use (only %s)' %
                                  (rel, lineno, m.group(1), own,
                                   ', '.join(BACKEND_HEADERS[m.group(1)])))
                    continue
                m = INCLUDE.match(line)
                if not m:
                    continue
                n_includes += 1
                where, name = '%s:%d' % (rel, lineno), m.group(1)
                found = resolve(root, rel, name)
                if not found:
                    errors.append('%s: includes "%s", which is no file of '
                                  'the tree' % (where, name))
                    continue
                if len(found) > 1:
                    errors.append('%s: includes "%s", which names %s: write '
                                  'the path' % (where, name,
                                                ' and '.join(found)))
                    continue
                target = found[0]
                graph[rel].add(target)
                line_of.setdefault((rel, target), lineno)
                theirs = layer_of(target)
                if theirs is None:
                    continue  # reported as a file without a layer
                if theirs != own and theirs not in below:
                    if own in closure(theirs):
                        how = 'above its own layer %s' % own
                    else:
                        how = ('beside its own layer %s, which does not '
                               'stand on it' % own)
                    errors.append('%s: includes %s of layer %s, %s' %
                                  (where, target, theirs, how))
                    continue
                shown = EXPORTS.get(theirs)
                if (theirs != own and shown is not None and
                        own not in WHITEBOX and target not in shown):
                    errors.append('%s: includes %s, which layer %s keeps to '
                                  'itself (it shows the layers above only '
                                  '%s)' % (where, target, theirs,
                                           ', '.join(shown)))
    for c in cycles(graph):
        steps = ['%s:%d' % (a, line_of[(a, b)]) for a, b in zip(c, c[1:])]
        errors.append('%s: headers include each other in a cycle: %s -> %s'
                      % (steps[0], ' -> '.join(steps), c[-1]))
    return errors, counts, len(files), n_includes


def closure_safe_names():
    """The layers whose uses are all known (closure() needs them)."""
    return [n for n in LAYERS if all(u in LAYERS for u in LAYERS[n][0])]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--root', default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), '..'))
    ap.add_argument('--stamp')
    args = ap.parse_args()
    root = os.path.normpath(args.root)
    errors, counts, n_files, n_includes = check(root)
    if errors:
        for e in errors:
            print(e, file=sys.stderr)
        print('check_layers: %d violation%s: the layers must go one way '
              '(tools/check_layers.py says which)' %
              (len(errors), '' if len(errors) == 1 else 's'), file=sys.stderr)
        return 1
    print('check_layers: %d files, %d includes, every one downward; no '
          'header cycle' % (n_files, n_includes))
    for name in LAYERS:
        uses = ', '.join(LAYERS[name][0]) or '-'
        n = counts.get(name, 0)
        print('  %-9s %4d file%s  uses %-16s %s' %
              (name, n, ' ' if n == 1 else 's', uses, LAYERS[name][1]))
    if args.stamp:
        with open(args.stamp, 'w', encoding='utf-8') as f:
            f.write('layers checked\n')
    return 0


if __name__ == '__main__':
    sys.exit(main())
