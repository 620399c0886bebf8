import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { Client } from 'pg';
import { connect, unique } from './helpers';

const root = join(__dirname, '..', '..');

test("README's worker runs as written", async () => {
  const block = /```javascript\n([\s\S]*?)```/.exec(readFileSync(join(root, 'README.md'), 'utf8'))![1]!;
  // Inside the package folder, so that require('@fencing/client') resolves to this package.
  const script = join(root, 'build', 'readme-example.js');
  writeFileSync(script, block);
  const db = await connect();
  const database = unique('readme');
  await db.query(`CREATE DATABASE ${database}`);
  try {
    const other = new Client({ database });
    await other.connect();
    await other.query('CREATE EXTENSION fencing');
    await other.end();
    const run = spawnSync(process.execPath, [script], {
      encoding: 'utf8',
      env: { ...process.env, PGDATABASE: database },
      timeout: 30_000,
    });
    assert.equal(run.status, 0, run.stderr);
    const [paid, refused] = run.stdout.trim().split('\n');
    const token = BigInt(/^paid with token (\d+)$/.exec(paid!)![1]!);
    assert.equal(refused, `refused: orders (id)=(101) ${token - 1n} < ${token}`);
  } finally {
    await db.query(`DROP DATABASE ${database} WITH (FORCE)`);
    await db.end();
  }
});
