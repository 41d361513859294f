"""Reads every number the report prints for a head and checks it against the one definition in
summary.json ("per_head", "diagnosis.at_risk") and against every other place that prints it: the
verdict, the at-risk table, figure 1's boxes (the PDF's text), the per-head table, the mitigation
table, figure 8's caption and diagnose's own lines. A number agrees when the printed digits are the
summary's value rounded to that many digits.

usage: report_consistency.py SUMMARY.json REPORT.pdf REPORT.html [DIAGNOSE_STDOUT]
Prints "ok N" (N numbers checked) or the first disagreements, exit 1."""
import html.parser
import json
import math
import re
import subprocess
import sys

summary_path, pdf, html_path = sys.argv[1:4]
diag_out = open(sys.argv[4]).read() if len(sys.argv) > 4 else None
S = json.load(open(summary_path))
errors, checked = [], [0]


def agrees(text, value, what):
    """text: a number as printed (%g, %.2f, %+.3g, a percentage...); value: the summary's."""
    checked[0] += 1
    t = text.strip().rstrip('%')
    m = re.fullmatch(r'[+-]?(\d+)(?:\.(\d+))?(?:e([+-]?\d+))?', t)
    if not m or value is None or not math.isfinite(value):
        errors.append('%s: printed %r, summary %r' % (what, text, value))
        return
    decimals = len(m.group(2) or '')
    exp = int(m.group(3) or 0)
    half_ulp = 0.5 * 10.0 ** (exp - decimals)
    if abs(float(t) - value) > half_ulp * (1 + 1e-9) + 1e-300:
        errors.append('%s: printed %s, summary %.9g' % (what, text, value))


class Tables(html.parser.HTMLParser):
    """Every <table> of the HTML report as [header, rows...], each row a list of cell texts; and the text."""

    def __init__(self):
        super().__init__()
        self.tables, self.cell, self.text = [], None, []

    def handle_starttag(self, tag, attrs):
        if tag == 'table':
            self.tables.append([])
        elif tag == 'tr' and self.tables:
            self.tables[-1].append([])
        elif tag in ('td', 'th'):
            self.cell = ''

    def handle_endtag(self, tag):
        if tag in ('td', 'th') and self.cell is not None:
            self.tables[-1][-1].append(' '.join(self.cell.split()))
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell += data
        self.text.append(data)


P = Tables()
P.feed(open(html_path).read())
body = ' '.join(' '.join(P.text).split())


def table(first_header):
    for t in P.tables:
        if t and t[0] and t[0][0] == first_header and (first_header != 'layer / head' or len(t[0]) == 8):
            return t
    return None


def lh(cell):
    L, H = (int(x) for x in cell.replace(' ', '').split('/'))
    return L, H


per_head = {(h['layer'], h['head']): h for h in S['per_head']}
diag = S.get('diagnosis')
at_risk = diag['at_risk'] if diag else []

# 1. the summary agrees with itself: the diagnosis copies the pooled numbers, and the pooled bias is the
#    last record's running sum
for r in at_risk:
    q = per_head[(r['layer'], r['head'])]
    for k_ar, k_q in (('delta_cumsum', 'delta_cumsum'), ('feature_mean_ulp', 'top_feature_mean_ulp'),
                      ('accum_gain', 'accum_gain'), ('top_feature', 'top_feature')):
        checked[0] += 1
        if r[k_ar] != q[k_q]:
            errors.append('summary: at_risk %s %r vs per_head %s %r' % (k_ar, r[k_ar], k_q, q[k_q]))
last = {}
for rec in S['heads']:
    last[(rec['layer'], rec['head'])] = rec
for k, q in per_head.items():
    if not last[k]['skipped']:
        agrees('%.12g' % q['delta_cumsum'], last[k]['delta']['cumsum'], 'per_head %s delta_cumsum vs record' % (k,))
n_heads = len(per_head)
n_flagged = sum(1 for q in per_head.values() if q['flagged'])
n_records = sum(q['steps'] for q in per_head.values())
n_dbiased = sum(q['delta_biased_steps'] for q in per_head.values())
checked[0] += 1
if n_records != len(S['heads']) or n_dbiased != sum(1 for h in S['heads'] if h.get('delta_biased')):
    errors.append('per_head counts %d records, %d delta-biased; heads lists %d' % (n_records, n_dbiased, len(S['heads'])))

# 2. the verdict: "N of M heads at risk"
if diag:
    m = re.search(r'(\d+) of (\d+) heads at risk', body)
    checked[0] += 1
    if not at_risk and 'No biased head: nothing at risk' in body:
        pass
    elif not m or int(m.group(1)) != len(at_risk) or int(m.group(2)) != n_heads:
        errors.append('verdict: %r, want %d of %d' % (m and m.group(0), len(at_risk), n_heads))

# 3. the at-risk table, row by row
t = table('#')
if diag:
    rows = t[1:] if t else []
    checked[0] += 1
    if len(rows) != len(at_risk):
        errors.append('at-risk table has %d rows, summary %d' % (len(rows), len(at_risk)))
    for row, r in zip(rows, at_risk):
        k = lh(row[1])
        q = per_head[k]
        checked[0] += 1
        if k != (r['layer'], r['head']):
            errors.append('at-risk row %s is %s, summary %s' % (row[0], k, (r['layer'], r['head'])))
        agrees(row[3], q['delta_cumsum'], 'at-risk %s accumulated sum' % (k,))
        m = re.search(r'top (\d+) \(([-+0-9.e]+) ULP\)', row[4])
        if m:
            checked[0] += 1
            if int(m.group(1)) != q['top_feature']:
                errors.append('at-risk %s top feature %s, per_head %d' % (k, m.group(1), q['top_feature']))
            agrees(m.group(2), q['top_feature_mean_ulp'], 'at-risk %s top feature mean ULP' % (k,))
        m = re.search(r'\(gain ([0-9.]+)\)', row[8])
        if q['accum_gain'] is not None:
            if not m:
                errors.append('at-risk %s: no gain in %r' % (k, row[8]))
            else:
                agrees(m.group(1), q['accum_gain'], 'at-risk %s gain' % (k,))

# 4. the per-head table: every analysed head once
t = table('layer / head')
rows = t[1:] if t else []
checked[0] += 1
if len(rows) != n_heads:
    errors.append('per-head table has %d rows, per_head %d' % (len(rows), n_heads))
for row in rows:
    k = lh(row[0])
    q = per_head[k]
    if row[1].startswith('skipped'):
        continue
    checked[0] += 1
    if row[1] != ('yes' if q['flagged'] else 'no'):
        errors.append('per-head %s flagged %r' % (k, row[1]))
    m = re.match(r'(\d+) of (\d+)', row[2])
    checked[0] += 1
    if not m or int(m.group(1)) != q['delta_biased_steps']:
        errors.append('per-head %s delta-biased steps %r, per_head %d' % (k, row[2], q['delta_biased_steps']))
    agrees(row[3], q['delta_cumsum'], 'per-head %s accumulated sum' % (k,))
    agrees(row[4], q['o_signed_mean'], 'per-head %s mean O error' % (k,))
    m = re.match(r'(\d+) \(([-+0-9.e]+) ULP\)', row[5])
    checked[0] += 1
    if not m or int(m.group(1)) != q['top_feature']:
        errors.append('per-head %s top feature %r, per_head %d' % (k, row[5], q['top_feature']))
    else:
        agrees(m.group(2), q['top_feature_mean_ulp'], 'per-head %s top feature mean ULP' % (k,))
    agrees(row[6], q['rows_multi_max'], 'per-head %s rows with >= 2 maxima' % (k,))

# 5. figure 1 (its boxes are text in the PDF), for the head it shows
fig1 = ' '.join(subprocess.run(['pdftotext', '-f', '2', '-l', '2', pdf, '-'], capture_output=True, text=True,
                               check=True).stdout.split())
m = re.search(r'Verdict for layer (\d+) head (\d+) \(step (\d+)\)', fig1) or \
    re.search(r'shown: layer (\d+) head (\d+), step (\d+)', fig1)
if not m:
    errors.append('figure 1 names no head: %r' % fig1[:300])
else:
    k, step = (int(m.group(1)), int(m.group(2))), int(m.group(3))
    q = per_head[k]
    if at_risk:
        checked[0] += 1
        if k != (at_risk[0]['layer'], at_risk[0]['head']):
            errors.append('figure 1 shows %s, the top at-risk head is %s' % (k, (at_risk[0]['layer'], at_risk[0]['head'])))
    m = re.search(r'(\d+) of (\d+) heads flagged; delta biased in (\d+) of (\d+) \(step, head\) records', fig1)
    checked[0] += 1
    if n_flagged == n_dbiased == 0:
        if 'delta_lp - delta_hp not biased in any head' not in fig1:
            errors.append('figure 1 should say no head is biased')
    elif not m or [int(x) for x in m.groups()] != [n_flagged, n_heads, n_dbiased, n_records]:
        errors.append('figure 1 counts %r, want %s' % (m and m.group(0), [n_flagged, n_heads, n_dbiased, n_records]))
    m = re.search(r'head \d+, top feature (\d+): ([-+0-9.e]+) ULP mean O error over (\d+) steps', fig1)
    if m:
        checked[0] += 1
        if int(m.group(1)) != q['top_feature'] or int(m.group(3)) != q['steps']:
            errors.append('figure 1 top feature %r' % m.group(0))
        agrees(m.group(2), q['top_feature_mean_ulp'], 'figure 1 top feature mean ULP')
    m = re.search(r'accumulated: ([-+0-9.e]+)', fig1)
    if m:
        agrees(m.group(1), q['delta_cumsum'], 'figure 1 accumulated sum')
    m = re.search(r'accumulation gain ([0-9.]+) \(all tokens, (\d+) steps\)', fig1)
    if q['accum_gain'] is not None:
        if not m:
            errors.append('figure 1 shows no pooled accumulation gain')
        else:
            agrees(m.group(1), q['accum_gain'], 'figure 1 accumulation gain')
    # the per-step numbers are labelled with their step and agree with that step's record
    rec = next(r for r in S['heads'] if (r['layer'], r['head']) == k and r['step'] == step)
    m = re.search(r'rows with >= 2 maxima at step %d: (\d+) of (\d+)' % step, fig1)
    if m:
        agrees(m.group(1), rec['ties']['rows_multi_max'], 'figure 1 tie rows at step %d' % step)
    m = re.search(r'step %d: \d+ terms of tied rows: mean cosine ([0-9.]+)' % step, fig1)
    if m:
        agrees(m.group(1), rec['rank1']['mean_cos'], 'figure 1 mean cosine')
        # figure 8's caption prints the same number
        m8 = re.search(r'Mean off-diagonal cosine ([0-9.]+) \(the number figure 1 shows', body)
        if m8:
            agrees(m8.group(1), rec['rank1']['mean_cos'], 'figure 8 caption mean cosine')

# 6. the mitigation table: each fix's bias left as the summary's ratio
t = next((t for t in P.tables if t and t[0] and t[0][-1] == 'recommended'), None)
if diag and at_risk:
    rows = t[1:] if t else []
    checked[0] += 1
    if len(rows) != len(at_risk):
        errors.append('mitigation table has %d rows, want %d' % (len(rows), len(at_risk)))
    for row, r in zip(rows, at_risk):
        fixes = {f['fix']: f for f in r.get('fixes', [])}
        for head, cell in zip(t[0][1:-1], row[1:-1]):
            f = fixes.get(head.split(' (')[0])
            if f is None or cell == 'not examined':
                continue
            agrees(cell.replace(' *', ''), round(100 * f['bias_ratio']) + 0.0, 'mitigation %s %s' % (row[0], f['fix']))
            checked[0] += 1
            if cell.endswith('*') != bool(f['removes']):
                errors.append('mitigation %s %s: %r, removes %r' % (row[0], f['fix'], cell, f['removes']))

# 7. diagnose's own lines
if diag_out is not None and diag:
    m = re.search(r'(\d+) of (\d+) heads at risk', diag_out)
    checked[0] += 1
    if not m and not at_risk:
        pass
    elif not m or (int(m.group(1)), int(m.group(2))) != (len(at_risk), n_heads):
        errors.append('diagnose says %r' % (m and m.group(0)))
    for r in at_risk:
        m = re.search(r'layer %d head %d: evidence: .*?accumulated sum_T\(delta_lp-delta_hp\) ([-+0-9.e]+); biased step: [^;]+; verdict: '
                      r'[a-z() ]+?(?: \(accumulation gain ([0-9.]+)\))?;' % (r['layer'], r['head']), diag_out)
        if not m:
            errors.append('diagnose has no line for layer %d head %d' % (r['layer'], r['head']))
            continue
        agrees(m.group(1), r['delta_cumsum'], 'diagnose %d/%d accumulated sum' % (r['layer'], r['head']))
        if r['accum_gain'] is not None:
            agrees(m.group(2) or 'none', r['accum_gain'], 'diagnose %d/%d gain' % (r['layer'], r['head']))

if errors:
    print('\n'.join(errors[:20]))
    sys.exit(1)
print('ok', checked[0])
