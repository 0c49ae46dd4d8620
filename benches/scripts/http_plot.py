"""The curl plot of BENCHMARKS.md: each client's CPU time and p99 relative to the bare client's,
per cell, from the report `http` prints.

    python3 benches/scripts/http_plot.py target/report/http.txt > benches/http.svg
"""
import sys

rows = []
for line in open(sys.argv[1]):
    parts = [p.strip() for p in line.strip().strip("|").split("|")]
    if len(parts) == 17 and parts[2].isdigit():
        rows.append((parts[0], parts[1], float(parts[7]), float(parts[13])))
cells = list(dict.fromkeys(r[0] for r in rows))
clients = [c for c in dict.fromkeys(r[1] for r in rows) if c != "bare"]
colors = {"isahc": "#7f7f7f", "interval": "#ff7f0e", "sockets": "#1f77b4", "bare-tasks": "#2ca02c"}
names = {"isahc": "isahc", "interval": "ffi-pump-curl, interval", "sockets": "ffi-pump-curl, sockets",
         "bare-tasks": "hand-written async wrapper"}
value = {(r[0], r[1]): (r[2], r[3]) for r in rows}

panel_w, panel_h, top, left = 440, 260, 50, 60
width, height = left + 2 * panel_w + 80, top + panel_h + 110
out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
       'font-family="sans-serif" font-size="12">',
       '<rect width="100%" height="100%" fill="white"/>']
for p, (title, k) in enumerate([("client CPU / bare client's", 0), ("p99 / bare client's", 1)]):
    x0 = left + p * (panel_w + 60)
    # Up to 3: a bar past it is cut there, its value written on it.
    peak = 3.0
    scale = panel_h / peak
    out.append(f'<text x="{x0}" y="30" font-weight="bold">{title} (1 = the bare loop)</text>')
    out.append(f'<rect x="{x0}" y="{top}" width="{panel_w}" height="{panel_h}" fill="none" stroke="grey"/>')
    for tick in range(0, int(peak) + 1):
        y = top + panel_h - tick * scale
        out.append(f'<text x="{x0 - 4}" y="{y + 4:.1f}" text-anchor="end">{tick}</text>')
    y1 = top + panel_h - scale
    out.append(f'<line x1="{x0}" y1="{y1:.1f}" x2="{x0 + panel_w}" y2="{y1:.1f}" stroke="black" stroke-dasharray="4 3"/>')
    group = panel_w / len(cells)
    bar = group / (len(clients) + 1)
    for c, cell in enumerate(cells):
        gx = x0 + c * group + bar / 2
        for i, client in enumerate(clients):
            v = value.get((cell, client))
            if v is None:
                continue
            h = min(v[k], peak) * scale
            out.append(f'<rect x="{gx + i * bar:.1f}" y="{top + panel_h - h:.1f}" width="{bar - 2:.1f}" '
                       f'height="{h:.1f}" fill="{colors.get(client, "#000")}"><title>{client}, {cell}: {v[k]:.2f}</title></rect>')
            out.append(f'<text x="{gx + i * bar + (bar - 2) / 2:.1f}" y="{top + panel_h - h - 3:.1f}" '
                       f'text-anchor="middle" font-size="10">{v[k]:.2f}</text>')
        label = cell.replace("N = ", "").replace(", held 1000 ms", " held 1 s")
        out.append(f'<text x="{x0 + c * group + group / 2:.1f}" y="{top + panel_h + 16}" text-anchor="middle">{label}</text>')
for i, client in enumerate(clients):
    lx = left + i * 220
    out.append(f'<rect x="{lx}" y="{height - 40}" width="12" height="12" fill="{colors.get(client, "#000")}"/>'
               f'<text x="{lx + 16}" y="{height - 30}">{names.get(client, client)}</text>')
out.append("</svg>")
print("\n".join(out))
