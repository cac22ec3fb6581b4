// server.js starts the package's local ZetaSQL gRPC server for a driver
// (analyze.js, evaluate.js) and waits until it answers; and reads the
// driver's request.
//
// The package's own testConnection gives the server 7.5 seconds; loading
// the server's shared library on a busy machine (a CI run with several
// test binaries at once) takes longer. start waits up to two minutes, and
// picks another port when the server exits early (its port was taken).
'use strict';
const path = require('path');
const { execFile } = require('child_process');

const waitMs = 120000;
const attempts = 5;

function delay(ms) {
  return new Promise(resolve => setTimeout(resolve, ms));
}

// start returns the connected client and a stop function that kills the
// server.
async function start(z, modules) {
  const suffix = (process.arch.startsWith('arm') ? '_arm' : '') + (process.platform === 'darwin' ? '' : '.so');
  const binary = path.join(modules, '@fivetrandevelopers/zetasql/lib/zetasql/remote_server' + suffix);
  const tried = [];
  for (let i = 0; i < attempts; i++) {
    const port = 20000 + Math.floor(Math.random() * 30000);
    tried.push(port);
    const server = execFile(binary, ['localhost', String(port)]);
    let exited = false;
    server.on('exit', () => { exited = true; });
    server.stdout.on('data', () => {});
    server.stderr.on('data', () => {});
    z.ZetaSQLClient.init(port);
    const client = z.ZetaSQLClient.getInstance();
    const deadline = Date.now() + waitMs;
    while (!exited && Date.now() < deadline) {
      try {
        await client.formatSql({ sql: 'SELECT 1;' });
        return { client, stop: () => server.kill('SIGKILL') };
      } catch (e) {
        if (e.code !== 14) { // 14: UNAVAILABLE, not listening yet
          server.kill('SIGKILL');
          throw e;
        }
      }
      await delay(250);
    }
    server.kill('SIGKILL');
    if (!exited) break; // alive but silent for two minutes: give up
  }
  throw new Error('the ZetaSQL server did not answer within ' + waitMs / 1000 + 's (ports tried: ' + tried.join(', ') + ')');
}

// read returns all a stream gives, as text: a driver's request.
function read(stream) {
  return new Promise((resolve, reject) => {
    let s = '';
    stream.setEncoding('utf8');
    stream.on('data', d => { s += d; });
    stream.on('end', () => resolve(s));
    stream.on('error', reject);
  });
}

module.exports = { start, read };
