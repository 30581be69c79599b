// Drives altcha-lib (the ALTCHA reference library) for internal/altcha's
// tests: one JSON request on stdin, one JSON answer on stdout.
import { webcrypto } from 'node:crypto';

// Node 18 (Debian bookworm's) has Web Crypto only as node:crypto's.
globalThis.crypto ??= webcrypto;
const { createChallenge, solveChallenge, verifySolution } = await import('altcha-lib/v1');

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const req = JSON.parse(Buffer.concat(chunks).toString('utf8'));

async function run() {
  switch (req.op) {
    case 'create':
      return createChallenge({
        hmacKey: req.key,
        maxnumber: req.maxnumber,
        expires: new Date(req.expires * 1000),
        params: req.params,
      });
    case 'solve': {
      const c = req.challenge;
      const found = await solveChallenge(c.challenge, c.salt, c.algorithm, c.maxnumber).promise;
      if (!found) throw new Error('no solution');
      const solution = { algorithm: c.algorithm, challenge: c.challenge, number: found.number, salt: c.salt, signature: c.signature };
      return { payload: Buffer.from(JSON.stringify(solution)).toString('base64') };
    }
    case 'verify':
      return { ok: await verifySolution(req.payload, req.key) };
    default:
      throw new Error(`unknown op ${req.op}`);
  }
}

process.stdout.write(JSON.stringify(await run()));
