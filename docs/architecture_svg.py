"""Writes docs/architecture.svg, the picture of docs/architecture.md: the layers of bnpzoo as boxes.

    python docs/architecture_svg.py
"""
from xml.sax.saxutils import escape

W = 980
rows = [
    ("Estimators  (bnpzoo/)", "#e8f0fe", [
        ("StickMixture", "DPGMM, PYPGGM, DPBMM, MixtureSVI (mixture.py): validate, start, learner.fit, finalise"),
        ("HDPGD", "hdp_gd.py"),
        ("CoupledDP", "coupled_dp.py"),
        ("CLI · registry", "cli.py, registry.py"),
    ]),
    ("Learner registries  (a name is read once, here)", "#fef7e0", [
        ("learners.REGISTRY",
         "vmm · vi · sga · sga-momentum · sga-fisher · svmm · svmm-mgrad · svmm-grad · natgrad-svi"),
        ("hdp_gd.LEARNERS", "vi · online-vi · svi"),
        ("gibbs.LABEL_STEPS", "collapsed · blocked · parallel · uncollapsed"),
    ]),
    ("Learners  (inference/)", "#e6f4ea", [
        ("vmm.fit_vmm", "_Phase: passes, then births, merges, collapse on MemoizedTerms"),
        ("StochasticSession", "run_svi(SVIProgram, Schedule, Hooks) + optim.py; Memo record, same moves"),
        ("hdp_gd/learner.py", "batch, memoized, online VI; svi.py: Pyro SVI"),
        ("coupled/kernel.py", "Pyro MCMCKernel -> gibbs.sweep steps 1-6 (compiled, cells, parallel, uncollapsed)"),
    ]),
    ("Programs and families", "#fce8e6", [
        ("models/", "the Pyro programs users copy and edit"),
        ("guides/", "MAP, mean-field, natural (conjugate) guides"),
        ("bnpzoo/families/", "contract.py: ComponentFamily Protocol + Capabilities(closed_forms, moves, spread_prior)"),
    ]),
    ("Below", "#f1f3f4", [("PyTorch", "tensors on CPU or GPU, torch.distributed"), ("Pyro", "poutine, SVI, MCMC"),
                          ("numba", "the sampler's compiled loops"), ("NumPy · SciPy", "")]),
]
row_h, gap, top = 118, 22, 20
H = top + len(rows) * (row_h + gap)
out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
       'font-family="Helvetica, Arial, sans-serif">',
       '<defs><marker id="arrow" markerWidth="10" markerHeight="10" refX="5" refY="5" orient="auto">'
       '<path d="M0,0 L10,5 L0,10 z" fill="#5f6368"/></marker></defs>',
       f'<rect width="{W}" height="{H}" fill="white"/>']


def wrap(text, width):
    words, lines, line = text.split(" "), [], ""
    for word in words:
        if len(line) + len(word) + 1 > width and line:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    return lines + ([line] if line else [])


for r, (title, colour, boxes) in enumerate(rows):
    y = top + r * (row_h + gap)
    out.append(f'<rect x="10" y="{y}" width="{W - 20}" height="{row_h}" rx="10" fill="{colour}" stroke="#9aa0a6"/>')
    out.append(f'<text x="24" y="{y + 20}" font-size="14" font-weight="bold" fill="#202124">{escape(title)}</text>')
    bw = (W - 40 - 12 * (len(boxes) - 1)) / len(boxes)
    for b, (name, detail) in enumerate(boxes):
        x = 20 + b * (bw + 12)
        out.append(f'<rect x="{x:.0f}" y="{y + 30}" width="{bw:.0f}" height="{row_h - 40}" rx="6" fill="white" '
                   'stroke="#5f6368"/>')
        out.append(f'<text x="{x + 8:.0f}" y="{y + 48}" font-size="13" font-weight="bold" fill="#1a73e8">'
                   f'{escape(name)}</text>')
        for i, line in enumerate(wrap(detail, int(bw / 6.6))[:4]):
            out.append(f'<text x="{x + 8:.0f}" y="{y + 66 + 14 * i}" font-size="11.5" fill="#3c4043">'
                       f'{escape(line)}</text>')
    if r < len(rows) - 1:
        out.append(f'<line x1="{W / 2}" y1="{y + row_h}" x2="{W / 2}" y2="{y + row_h + gap - 2}" stroke="#5f6368" '
                   'stroke-width="2" marker-end="url(#arrow)"/>')
out.append("</svg>")
open(__file__.replace("architecture_svg.py", "architecture.svg"), "w").write("\n".join(out) + "\n")
