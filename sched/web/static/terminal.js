// A job's terminal in the page: xterm.js over a WebSocket that carries
// schedd's attach stream, one frame per binary message: a type byte, a
// big-endian uint32 payload length, the payload.
//
//   'd' data (keystrokes in, output out)   'w' window size (rows, cols)
//   'c' end of input   'x' exit status (int32)   'e' why there is none
//
// Closing the terminal detaches; the job goes on.
'use strict';

const Term = (() => {
  const enc = new TextEncoder();
  const MAX = 32 << 10; // internal/attach.MaxPayload
  let cur = null; // { ws, term, fit, job, onResize }

  function frame(type, payload) {
    const b = new Uint8Array(5 + payload.length);
    b[0] = type.charCodeAt(0);
    new DataView(b.buffer).setUint32(1, payload.length);
    b.set(payload, 5);
    return b;
  }

  function windowFrame(rows, cols) {
    const p = new Uint8Array(4);
    const v = new DataView(p.buffer);
    v.setUint16(0, rows);
    v.setUint16(2, cols);
    return frame('w', p);
  }

  function status(text) { document.getElementById('terminal-status').textContent = text; }

  // open attaches to job's main1 in the terminal section.
  function open(job) {
    close();
    const section = document.getElementById('terminal-section');
    const box = document.getElementById('terminal');
    section.hidden = false;
    box.replaceChildren();
    document.getElementById('terminal-title').textContent = `Terminal: job ${job} main1`;
    status('connecting…');
    const term = new Terminal({ convertEol: false, cursorBlink: true, fontSize: 13, scrollback: 5000 });
    const fit = new FitAddon.FitAddon();
    term.loadAddon(fit);
    term.open(box);
    fit.fit();
    const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
    const ws = new WebSocket(`${proto}//${location.host}/v1/jobs/${job}/terminal?host=main1`);
    ws.binaryType = 'arraybuffer';
    const c = { ws, term, fit, job, ended: false };
    cur = c;
    const send = b => { if (ws.readyState === WebSocket.OPEN) ws.send(b); };
    ws.onopen = () => {
      status('attached · × detaches, the job goes on');
      send(windowFrame(term.rows, term.cols));
      term.focus();
    };
    // A frame holds at most 32 KiB (a long paste is several).
    term.onData(d => {
      const b = enc.encode(d);
      for (let i = 0; i < b.length; i += MAX) send(frame('d', b.subarray(i, i + MAX)));
    });
    term.onResize(({ rows, cols }) => send(windowFrame(rows, cols)));
    c.onResize = () => { try { fit.fit(); } catch (e) { /* hidden */ } };
    window.addEventListener('resize', c.onResize);
    ws.onmessage = ev => {
      const b = new Uint8Array(ev.data);
      if (b.length < 5) return;
      const type = String.fromCharCode(b[0]);
      const p = b.subarray(5);
      if (type === 'd') {
        term.write(p);
      } else if (type === 'x') {
        c.ended = true;
        const code = new DataView(p.buffer, p.byteOffset, 4).getInt32(0);
        status(`the command exited with status ${code}`);
      } else if (type === 'e') {
        c.ended = true;
        const msg = new TextDecoder().decode(p);
        term.write('\r\n\x1b[31m' + msg.replace(/\n/g, '\r\n') + '\x1b[0m\r\n');
        status('no terminal: ' + msg);
      }
    };
    ws.onclose = () => { if (cur === c && !c.ended) status('disconnected'); };
  }

  // close detaches and hides the terminal.
  function close() {
    if (!cur) return;
    const c = cur;
    cur = null;
    window.removeEventListener('resize', c.onResize);
    try { c.ws.close(); } catch (e) { /* closed */ }
    c.term.dispose();
    document.getElementById('terminal-section').hidden = true;
  }

  // text is what the terminal shows, line by line (for tests and copying).
  function text() {
    if (!cur) return '';
    const buf = cur.term.buffer.active;
    const out = [];
    for (let i = 0; i < buf.length; i++) out.push(buf.getLine(i).translateToString(true));
    return out.join('\n');
  }

  // paste sends text as if pasted into the terminal.
  function paste(t) { if (cur) cur.term.paste(t); }

  return { open, close, text, paste, job: () => (cur ? cur.job : 0) };
})();
