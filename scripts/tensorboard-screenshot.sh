#!/usr/bin/env bash
# The screenshot in docs/tensorboard.md: TensorBoard's HParams table over an exported sweep.
#
#   scripts/tensorboard-screenshot.sh [sweep_dir=runs/sweep_replicas_batch] [png=docs/images/tensorboard-hparams.png]
#
# Exports the sweep to a temp directory (the runs are only read), starts the venv's `tensorboard` on
# a free port of 127.0.0.1, opens its HParams tab in headless Chromium, and drives the page over the
# DevTools protocol (Node 20's WebSocket): in the sidebar it hides the hparam columns seed and
# replicas.threads and shows the metrics test/acc, test/loss and images_per_s instead of
# TensorBoard's default (the first five tags by name), widens the Trial ID column to the group names
# (as dragging its edge would; COL_WIDTH sets the others), and opens one group's "Show Metrics"
# (DETAILS, a group name; empty for none). It then captures the page, crops it to the table
# (CROP=x0,y0,x1,y1), and stops the processes it started. Needs: ddplab (DDPLAB, default build/bin/ddplab),
# .venv with tensorboard and Pillow, chromium, node >= 20.10. Nothing reaches the network.
set -euo pipefail
cd "$(dirname "$0")/.."
sweep=${1:-runs/sweep_replicas_batch}
png=${2:-docs/images/tensorboard-hparams.png}
ddplab=${DDPLAB:-build/bin/ddplab}
venv=${VENV:-.venv}
width=${WIDTH:-1940}
height=${HEIGHT:-1000}

work=$(mktemp -d)
tb_pid= ; chrome_pid=
cleanup() {
  [ -n "$chrome_pid" ] && kill "$chrome_pid" 2>/dev/null || true
  [ -n "$tb_pid" ] && kill "$tb_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

"$ddplab" export tensorboard "$sweep" --out "$work/tb" 2>/dev/null
port=$("$venv/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$venv/bin/tensorboard" --logdir "$work/tb" --host 127.0.0.1 --port "$port" >"$work/tb.log" 2>&1 &
tb_pid=$!
for _ in $(seq 60); do
  curl -sf "http://127.0.0.1:$port/data/plugins_listing" >/dev/null && break
  sleep 1
done

chromium --headless=new --disable-gpu --no-sandbox --hide-scrollbars --no-first-run \
  --user-data-dir="$work/chrome" --remote-debugging-port=0 \
  --window-size="$width,$height" about:blank >"$work/chrome.log" 2>&1 &
chrome_pid=$!
for _ in $(seq 60); do [ -s "$work/chrome/DevToolsActivePort" ] && break; sleep 0.5; done
devtools=$(head -1 "$work/chrome/DevToolsActivePort")

cat >"$work/shot.mjs" <<'EOF'
const [devtools, url, out, width, height, trialWidth, colWidth, details] = process.argv.slice(2);
const sleep = ms => new Promise(r => setTimeout(r, ms));
const targets = await (await fetch(`http://127.0.0.1:${devtools}/json/list`)).json();
const ws = new WebSocket(targets.find(t => t.type === 'page').webSocketDebuggerUrl);
const pending = new Map(); let next = 0;
ws.onmessage = e => { const m = JSON.parse(e.data); if (pending.has(m.id)) { pending.get(m.id)(m); pending.delete(m.id); } };
await new Promise(r => { ws.onopen = r; });
const send = (method, params = {}) => new Promise((res, rej) => {
  const id = ++next;
  pending.set(id, m => (m.error ? rej(new Error(method + ': ' + JSON.stringify(m.error))) : res(m.result)));
  ws.send(JSON.stringify({ id, method, params }));
});
const evaluate = async expr => (await send('Runtime.evaluate', { expression: expr, returnByValue: true })).result.value;
// The sidebar's checkboxes live in Polymer shadow roots: walk them all.
const walk = `const boxes = []; const walk = root => { for (const el of root.querySelectorAll('*')) {
  if (el.tagName === 'PAPER-CHECKBOX') boxes.push(el); if (el.shadowRoot) walk(el.shadowRoot); } }; walk(document);`;
await send('Emulation.setDeviceMetricsOverride', { width: +width, height: +height, deviceScaleFactor: 1, mobile: false });
await send('Page.navigate', { url });
const want = { 'seed': false, 'replicas.threads': false, 'comm_bytes': false, 'comm_wait_s': false, 'epoch': false,
  'grad_noise_scale': false, 'images_per_s': true, 'test/acc': true, 'test/loss': true, 'train/loss': false };
let found = [];
for (let i = 0; i < 120 && found.length < Object.keys(want).length; i++) {
  await sleep(500);
  found = await evaluate(`(() => { ${walk} return boxes.map(b => b.textContent.trim()); })()`) || [];
  found = found.filter(t => t in want);
}
if (found.length < Object.keys(want).length) throw new Error('sidebar not found; saw: ' + found);
await sleep(2000);
const clicked = await evaluate(`(() => { ${walk} const want = ${JSON.stringify(want)}; const done = [];
  for (const b of boxes) { const t = b.textContent.trim(); if (t in want && b.checked !== want[t]) { b.click(); done.push(t); } }
  return done; })()`);
console.error('toggled:', clicked.join(', '));
await sleep(4000);
// Widen the Trial ID column (the group name; a user drags its edge) and open one group's details.
const grid = `(() => { let found = null; const walk = root => { for (const el of root.querySelectorAll('*')) {
  if (el.id === 'sessionGroupsTable') found = el; if (el.shadowRoot) walk(el.shadowRoot); } }; walk(document); return found; })()`;
console.error(await evaluate(`(() => { const g = ${grid}; if (!g) return 'no table';
  const cols = [...g.querySelectorAll('vaadin-grid-column')];
  cols.forEach((c, i) => { if (i === 0) c.width = ${JSON.stringify(trialWidth)}; else if (c.getAttribute('width') === '10em') { c.width = ${JSON.stringify(colWidth)}; } });
  const item = (g.items || []).find(i => i.name === ${JSON.stringify(details)}); if (item) g.openItemDetails(item);
  return 'groups: ' + (g.items || []).length + (item ? ', details: ' + item.name : ''); })()`));
await sleep(6000);
const shot = await send('Page.captureScreenshot', { format: 'png' });
await (await import('node:fs/promises')).writeFile(out, Buffer.from(shot.data, 'base64'));
ws.close();
EOF
node --experimental-websocket "$work/shot.mjs" "$devtools" "http://127.0.0.1:$port/#hparams" "$work/full.png" "$width" "$height" "${TRIAL_WIDTH:-32em}" "${COL_WIDTH:-10em}" \
  "${DETAILS-batch.per_replica=128, replicas.count=2, schedule.scale_rule=linear}"

# Crop to the table: the top bar, the view tabs and the table rows, without the empty page below.
"$venv/bin/python" - "$work/full.png" "$png" "${CROP:-0,0,$width,862}" <<'EOF'
import sys
from PIL import Image
src, dst, box = sys.argv[1], sys.argv[2], tuple(int(v) for v in sys.argv[3].split(','))
Image.open(src).convert('RGB').crop(box).quantize(colors=64).save(dst, optimize=True)
print(f"{dst}: {box[2] - box[0]}x{box[3] - box[1]}")
EOF
