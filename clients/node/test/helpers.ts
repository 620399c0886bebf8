import { Client } from 'pg';

/** A connection of the test's own (PG* environment). */
export async function connect(): Promise<Client> {
  const client = new Client({ application_name: 'fencing node tests' });
  await client.connect();
  return client;
}

let counter = 0;
/** A name unique to this run. */
export function unique(prefix: string): string {
  return `${prefix}_${process.pid}_${Date.now() % 100000}_${counter++}`;
}

/** Creates the extension (once) and a protected table `name` with row id 1. */
export async function protectedTable(client: Client, name: string): Promise<void> {
  await client.query('CREATE EXTENSION IF NOT EXISTS fencing').catch(async (err) => {
    if (err.code !== '23505' && err.code !== '42710') throw err; // a concurrent CREATE
  });
  await client.query(`CREATE TABLE ${name} (id int PRIMARY KEY, status text)`);
  await client.query(`SELECT fencing.protect('${name}')`);
  await client.query(`INSERT INTO ${name} VALUES (1, 'new', 1)`);
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Blocks the event loop for `ms` (a frozen process: no timer, no I/O runs). */
export function freeze(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

