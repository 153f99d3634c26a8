// What a command writes on stderr: a print run's answers (src/answer.ts).

/** What fn writes on stderr (a print run's answers), and nothing of it on the test's. */
export async function stderrOf(fn: () => Promise<unknown>): Promise<string> {
	const write = process.stderr.write;
	let out = "";
	process.stderr.write = ((chunk: string | Uint8Array) => {
		out += String(chunk);
		return true;
	}) as typeof process.stderr.write;
	try {
		await fn();
	} finally {
		process.stderr.write = write;
	}
	return out;
}
