// The operator console's page: it shows what the console pushes over its WebSocket (the
// state, the camera frames) and sends the operator's answers back. It keeps no state of its
// own: a reload shows the question that is waiting.
"use strict";
const token = new URLSearchParams(location.search).get("token") || "";
const $ = (id) => document.getElementById(id);
const PHASES = ["gate", "running", "verdict", "fault", "summary"];
const SECTION = {gate: "gate", running: "run", verdict: "ask", fault: "fault", summary: "summary"};
let state = null, seq = -1, phase = "", socket = null, everOpen = false, busyTries = 0;
let timerBase = 0, timerAt = 0, countBase = null, countAt = 0, holdSent = false;
const urls = {};  // camera name -> its frame's object url

function clock(s) {
  const m = Math.floor(s / 60), r = s - 60 * m;
  return String(m).padStart(2, "0") + ":" + r.toFixed(1).padStart(4, "0");
}
function showOnly(now) {
  for (const p of PHASES) $(SECTION[p]).hidden = p !== now;
  $("wait").hidden = PHASES.includes(now);
  $("title-box").hidden = !PHASES.includes(now) || now === "summary";
}
function lines(ul, items) {
  ul.replaceChildren(...items.map((line) => {
    const li = document.createElement("li"); li.textContent = line; return li;
  }));
}
function progress(s) {
  const p = s.progress;
  if (!p) { $("progress").textContent = ""; return; }
  let text = "episode " + p.number + (p.planned ? " of " + p.planned : "");
  if (p.budget) text += " · budget " + p.budget;
  $("progress").textContent = text;
}
function render(s) {
  state = s;
  $("note").textContent = s.note;
  progress(s);
  if (s.seq !== seq || s.phase !== phase) {
    seq = s.seq; phase = s.phase; holdSent = false;
    $("error").textContent = "";
    for (const id of ["score", "notes", "run-score"]) $(id).value = "";
    $("title").textContent = s.title;
    $("arm").hidden = !s.arm;
    $("arm").textContent = s.arm ? "arm " + s.arm : "";
    lines($("lines"), s.lines);
    lines($("summary-lines"), s.summary);
    for (const b of document.querySelectorAll("button")) b.disabled = false;
    showOnly(s.phase);
    $("wait-text").textContent = s.phase === "closed" ? "The session has ended." : s.note + " …";
  }
  timerBase = s.elapsed; timerAt = performance.now();
  countBase = s.countdown; countAt = performance.now();
  $("accept").hidden = s.detector === null;
  $("run-state").textContent = s.stopping ? "stopping…" : s.started ? "running" : "connecting…";
  if (s.stopping) $("stop").disabled = true;
  $("told").textContent = s.instruction ? "the policy is told: " + s.instruction : "";
  // the gate: the robot's cameras live, else its reference image, and the line saying which
  const view = s.gate_camera;
  $("gate-camera").hidden = !view;
  $("gate-camera").textContent = view ? view.said : "";
  $("gate-camera").dataset.kind = view ? view.kind : "";
  if (view && view.kind === "reference") $("reference-said").textContent = view.said;
  $("reference-box").hidden = !s.reference;
  const picture = s.reference
    ? "/reference.jpg?token=" + encodeURIComponent(token) + "&seq=" + s.seq : "";
  if (picture && $("reference").dataset.src !== picture) {  // fetched once a gate
    $("reference").dataset.src = picture; $("reference").src = picture;
  }
  const live = s.phase === "gate" && !!view && view.kind === "live";
  $("camera-box").hidden = !(s.cameras.length && (live || ["running", "verdict"].includes(s.phase)));
  for (const fig of Array.from($("cameras").children)) {
    if (!s.cameras.includes(fig.dataset.name)) fig.remove();
  }
  tick();
}
function tick() {
  if (!state) return;
  const running = state.phase === "running" && state.started && !state.stopping;
  const t = running ? timerBase + (performance.now() - timerAt) / 1000 : timerBase;
  $("timer").textContent = state.phase === "running" && !state.started ? "--:--.-" : clock(t);
  const left = countBase === null ? null : countBase - (performance.now() - countAt) / 1000;
  $("countdown-box").hidden = left === null;
  if (left !== null) $("countdown").textContent = Math.max(0, left).toFixed(1);
}
function frame(data) {
  const bytes = new Uint8Array(data), n = bytes[0];
  const name = new TextDecoder().decode(bytes.subarray(1, 1 + n));
  const blob = new Blob([bytes.subarray(1 + n)], {type: "image/jpeg"});
  let fig = Array.from($("cameras").children).find((f) => f.dataset.name === name);
  if (!fig) {
    fig = document.createElement("figure");
    fig.dataset.name = name;
    const img = document.createElement("img"); img.alt = name;
    const cap = document.createElement("figcaption"); cap.textContent = name;
    fig.append(img, cap);
    $("cameras").append(fig);
  }
  const img = fig.querySelector("img"), old = urls[name];
  urls[name] = URL.createObjectURL(blob);
  img.src = urls[name];
  if (old) img.onload = () => URL.revokeObjectURL(old);
}
function ended() {
  showOnly("closed");
  $("camera-box").hidden = true;
  $("error").textContent = "";
  $("note").textContent = "the session ended";
  $("wait-text").textContent = "The console is not answering: the session has ended.";
  phase = ""; state = null;
}
function connect() {
  socket = new WebSocket("ws://" + location.host + "/ws?token=" + encodeURIComponent(token));
  socket.binaryType = "arraybuffer";
  socket.onopen = () => { everOpen = true; busyTries = 0; $("error").textContent = ""; };
  socket.onmessage = (e) => {
    if (typeof e.data !== "string") { frame(e.data); return; }
    const m = JSON.parse(e.data);
    if (m.state) render(m.state);
    if (m.reply) replied(m.reply);
  };
  socket.onclose = () => {
    if (!everOpen && busyTries < 60) {  // refused (busy) before it ever opened: try again
      busyTries += 1;
      $("error").textContent = "the console is busy; retrying";
      setTimeout(connect, 1000);
    } else {
      ended();
    }
  };
}
function send(action, extra) {
  if (!socket || socket.readyState !== WebSocket.OPEN) return;
  socket.send(JSON.stringify(Object.assign({seq: seq, action: action}, extra || {})));
}
function answer(action) {
  const extra = {notes: $("notes").value, score: $("score").value};
  if (phase === "running") {
    extra.score = $("run-score").value; extra.notes = "";
    if (action === "instruct") { extra.text = $("instruction").value; }
  }
  if (!["hold", "instruct"].includes(action)) {
    for (const b of document.querySelectorAll("#" + SECTION[phase] + " button")) b.disabled = true;
  }
  send(action, extra);
}
function replied(reply) {
  if (reply.error) {
    $("error").textContent = reply.error;
    for (const b of document.querySelectorAll("button")) b.disabled = false;
  } else {
    $("error").textContent = "";
    $("note").textContent = reply.said;
    if (reply.said.startsWith("told the policy")) $("instruction").value = "";
  }
}
function hold() {  // typing a note or a score holds the detector's countdown: nothing is lost
  if (phase === "verdict" && state && state.countdown !== null && !holdSent) {
    holdSent = true; send("hold");
  }
}
for (const b of document.querySelectorAll("button[data-action]")) {
  b.addEventListener("click", () => answer(b.dataset.action));
}
for (const id of ["notes", "score"]) $(id).addEventListener("input", hold);
$("instruction").addEventListener("keydown", (e) => {
  if (e.key === "Enter") { e.preventDefault(); answer("instruct"); }
});
$("score").addEventListener("keydown", (e) => {
  if (e.key === "Enter") { e.preventDefault(); answer("partial"); }
});
const KEYS = {
  gate: {"Enter": "go", "s": "skip", "q": "quit"},
  running: {"x": "stop", " ": "stop", "y": "success", "n": "failure"},
  verdict: {"y": "success", "n": "failure", "r": "discard", "Enter": "accept", "h": "hold"},
  fault: {"r": "retry", "s": "skip", "q": "quit"},
};
document.addEventListener("keydown", (e) => {
  const t = e.target;  // typing goes to its field; a focused button takes Enter and space
  if (t instanceof HTMLInputElement) return;
  if (t instanceof HTMLButtonElement && (e.key === "Enter" || e.key === " ")) return;
  if (e.ctrlKey || e.metaKey || e.altKey) return;
  if (phase === "running" && e.key === "i") { e.preventDefault(); $("instruction").focus(); return; }
  if (phase === "running" && e.key === "p") { e.preventDefault(); $("run-score").focus(); return; }
  if (phase === "verdict" && e.key === "p") { e.preventDefault(); hold(); $("score").focus(); return; }
  const action = (KEYS[phase] || {})[e.key];
  if (!action || (action === "accept" && (!state || state.detector === null))) return;
  e.preventDefault();
  answer(action);
});
setInterval(tick, 100);
connect();
