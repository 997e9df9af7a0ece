#!/usr/bin/env python3
"""Generates the per-function part of docs/errors.md from the sources.

For every function declared in include/vattn.h: the status codes and
messages its extern "C" shim (src/api/*.cpp) returns directly, plus the
messages of the internal helpers it calls (one level, by name), and the
test files under tests/ that call it together with an error status.
Usage: tests/reliability/gen_errors_md.py > /tmp/table.md
"""
import os, re, sys

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..')
hdr = open(os.path.join(root, 'include/vattn.h')).read()
funcs = sorted(set(re.findall(r'VATTN_API\s+[\w\s\*]*?\b(vattn_\w+)\s*\(', hdr)))

def read_all(d, exts):
    out = {}
    for dp, _, fs in os.walk(os.path.join(root, d)):
        for f in fs:
            if f.endswith(exts):
                p = os.path.join(dp, f)
                out[os.path.relpath(p, root)] = open(p, errors='replace').read()
    return out

src = read_all('src', ('.cpp', '.h'))
tests = read_all('tests', ('.cpp', '.c'))

def body_of(name, text):
    m = re.search(r'VATTN_API[^;{]*\b' + name + r'\s*\([^;{]*\)\s*\{', text)
    if not m:
        return None
    i, depth = m.end(), 1
    while depth and i < len(text):
        depth += {'{': 1, '}': -1}.get(text[i], 0)
        i += 1
    return text[m.end():i]

CHECK = re.compile(r'(VATTN_CHECK_ARG|VATTN_CHECK_NOT_NULL|fail)\s*\((.*?)\);', re.S)
STATUS = {'VATTN_CHECK_ARG': 'INVALID_ARGUMENT', 'VATTN_CHECK_NOT_NULL': 'INVALID_ARGUMENT'}

def checks(body):
    rows = []
    for kind, args in CHECK.findall(body):
        args = ' '.join(args.split())
        if kind == 'VATTN_CHECK_NOT_NULL':
            rows.append(('INVALID_ARGUMENT', "'%s' is NULL" % args))
            continue
        if kind == 'fail':
            m = re.match(r'(?:::)?(?:vattn::)?\s*(VATTN_(?:ERR_)?\w+)\s*,\s*"(.*?)"', args)
            if m:
                rows.append((m.group(1).replace('VATTN_ERR_', ''), m.group(2)))
            continue
        m = re.match(r'(.*?),\s*"(.*?)"', args)
        if m:
            rows.append(('INVALID_ARGUMENT', m.group(2)))
    return rows

ERRS = r'VATTN_ERR_[A-Z_]+'
print('| function | rejects (status: message, from the code) | tests asserting an error |')
print('|---|---|---|')
for f in funcs:
    body = None
    for p, t in src.items():
        if p.startswith('src/api/'):
            body = body_of(f, t)
            if body is not None:
                break
    if body is None:
        print('| `%s` | (not implemented) | |' % f)
        continue
    rows = checks(body)
    if 'read_options' in body or 'check_out_struct' in body:
        rows.append(('INVALID_ARGUMENT', 'struct_size outside [first published size, sizeof]'))
    helpers = set(re.findall(r'vattn::(\w+)\(', body)) - {'guard', 'guard_void', 'fail', 'read_options', 'check_out_struct', 'write_out'}
    cov = sorted({p for p, t in tests.items()
                  if re.search(r'\b' + f + r'\s*\(', t) and re.search(ERRS, t)})
    msgs = '<br>'.join('%s: %s' % (s, m.replace('|', '\\|')[:110]) for s, m in rows[:14])
    if len(rows) > 14:
        msgs += '<br>... (%d more)' % (len(rows) - 14)
    if helpers:
        msgs += '<br>+ checks in ' + ', '.join('`%s`' % h for h in sorted(helpers))
    print('| `%s` | %s | %s |' % (f, msgs or 'never fails', '<br>'.join(cov) or '**none**'))
