/**
 * The published `@e2b/code-interpreter` SDK, unmodified, against Tidepool's `code-interpreter-v1` template
 * (docker/code-interpreter, apps/code-interpreter) through the platform's proxy (routing headers, as with
 * `sandboxUrl`). Real containers, a real ipykernel, real Node workers; nothing is mocked.
 */
import { type Context, type Execution, Sandbox } from '@e2b/code-interpreter';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestPlatform } from './support/start-platform.ts';

let platform: TestPlatform;
let sbx: Sandbox;
const sandboxes: Sandbox[] = [];

const create = async (options: Record<string, unknown> = {}): Promise<Sandbox> => {
  const created = await Sandbox.create({ ...platform.sdk, timeoutMs: 600_000, ...options });
  sandboxes.push(created);
  return created;
};

/** A raw request to the sandbox's port 49999 through the platform proxy (what the SDK does, without its checks). */
const raw = (sandbox: Sandbox, path: string, init: RequestInit & { headers?: Record<string, string> } = {}): Promise<Response> =>
  fetch(`${platform.url}${path}`, {
    ...init,
    headers: { 'E2b-Sandbox-Id': sandbox.sandboxId, 'E2b-Sandbox-Port': '49999', 'content-type': 'application/json', ...(init.headers ?? {}) },
  });

beforeAll(async () => {
  platform = await startTestPlatform({ sandboxNetwork: 'tidepool-sdk-ci-test' });
  const started = Date.now();
  sbx = await create({ envs: { TIDEPOOL_GLOBAL: 'from-create' } });
  console.info(`code-interpreter sandbox ready in ${Date.now() - started} ms`);
}, 300_000);

afterAll(async () => {
  for (const s of sandboxes) await s.kill().catch(() => undefined);
  await platform?.dispose();
});

describe('the template', () => {
  it('is the SDK default, also named code-interpreter, with 2 CPUs and 2048 MB', async () => {
    const info = await sbx.getInfo();
    expect(info.templateId).toBe('code-interpreter');
    const list = await fetch(`${platform.url}/templates`, { headers: { 'x-api-key': platform.apiKey } }).then((r) => r.json() as Promise<any[]>);
    const template = list.find((t) => t.templateID === 'code-interpreter');
    expect(template).toMatchObject({ cpuCount: 2, memoryMB: 2048 });
    expect(template.aliases).toContain('code-interpreter-v1');
    const health = await raw(sbx, '/health');
    expect(health.status).toBe(200);
    expect(await health.json()).toBe('OK');
  });

  it('starts the default Python and JavaScript contexts with the server', async () => {
    const contexts = await sbx.listCodeContexts();
    expect(contexts.map((c) => c.language).sort()).toEqual(expect.arrayContaining(['javascript', 'python']));
    for (const c of contexts) expect(c.cwd).toBe('/home/user');
  });
});

describe('Python', () => {
  it('keeps state between executions; the last expression is the main result', async () => {
    await sbx.runCode('x = 1');
    const execution = await sbx.runCode('x += 1; x');
    expect(execution.text).toBe('2');
    expect(execution.results).toHaveLength(1);
    expect(execution.results[0].isMainResult).toBe(true);
    expect(execution.executionCount).toBeGreaterThanOrEqual(2);
  });

  it('streams stdout, stderr and results to the callbacks in order, as they happen', async () => {
    const events: string[] = [];
    const times: number[] = [];
    const started = Date.now();
    const execution = await sbx.runCode(
      'import sys, time\nprint("one", flush=True)\ntime.sleep(1.5)\nprint("two", file=sys.stderr, flush=True)\ndisplay(3)\n4',
      {
        onStdout: (m) => { events.push(`stdout:${m.line}`); times.push(Date.now() - started); },
        onStderr: (m) => { events.push(`stderr:${m.line}`); times.push(Date.now() - started); },
        onResult: (r) => { events.push(`result:${r.text}:${r.isMainResult}`); times.push(Date.now() - started); },
      },
    );
    const total = Date.now() - started;
    expect(events).toEqual(['stdout:one\n', 'stderr:two\n', 'result:3:false', 'result:4:true']);
    // "one" arrived before the sleep ended, not with the rest at the end.
    expect(total - times[0]).toBeGreaterThan(1000);
    expect(execution.logs).toEqual({ stdout: ['one\n'], stderr: ['two\n'] });
  });

  it('reports exceptions with name, value and traceback (and the onError callback)', async () => {
    const errors: string[] = [];
    const execution = await sbx.runCode('undefined_name + 1', { onError: (e) => errors.push(e.name) });
    expect(execution.error?.name).toBe('NameError');
    expect(execution.error?.value).toContain("name 'undefined_name' is not defined");
    expect(execution.error?.traceback).toContain('NameError');
    expect(errors).toEqual(['NameError']);
  });

  it('applies env vars to one execution only; the sandbox global env vars to all', async () => {
    const withEnv = await sbx.runCode('import os; os.environ.get("PER_RUN")', { envs: { PER_RUN: 'yes' } });
    expect(withEnv.text).toBe('yes');
    const after = await sbx.runCode('str(os.environ.get("PER_RUN"))');
    expect(after.text).toBe('None');
    const global = await sbx.runCode('os.environ.get("TIDEPOOL_GLOBAL")');
    expect(global.text).toBe('from-create');
  });

  it('gives display() outputs and rich formats: HTML, Markdown, LaTeX, JSON, SVG', async () => {
    const execution = await sbx.runCode(
      [
        'from IPython.display import HTML, Markdown, Latex, JSON, SVG, display',
        'display(HTML("<b>bold</b>"))',
        'display(Markdown("# Title"))',
        'display(Latex(r"$x^2$"))',
        'display(JSON({"k": [1, 2]}))',
        'display(SVG(\'<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"></svg>\'))',
      ].join('\n'),
    );
    expect(execution.error).toBeUndefined();
    const [html, markdown, latex, json, svg] = execution.results;
    expect(execution.results.every((r) => !r.isMainResult)).toBe(true);
    expect(html.html).toBe('<b>bold</b>');
    expect(markdown.markdown).toBe('# Title');
    expect(latex.latex).toBe('$x^2$');
    expect(JSON.parse(json.json!)).toEqual({ k: [1, 2] });
    expect(svg.svg).toContain('<svg');
  });

  it('gives a pandas DataFrame as data (column -> values) and HTML', async () => {
    const execution = await sbx.runCode('import pandas as pd\npd.DataFrame({"a": [1, 2, None], "b": ["x", "y", "z"]})');
    const [result] = execution.results;
    expect(result.isMainResult).toBe(true);
    expect(result.data).toEqual({ a: [1, 2, null], b: ['x', 'y', 'z'] });
    expect(result.html).toContain('<table');
    expect(result.text).toContain('a');
  });

  it('gives a shown matplotlib figure as a PNG', async () => {
    const execution = await sbx.runCode('import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.title("squares")\nplt.show()');
    expect(execution.error).toBeUndefined();
    const figure = execution.results.find((r) => r.png);
    expect(figure).toBeDefined();
    expect(figure!.isMainResult).toBe(false);
    expect(Buffer.from(figure!.png!, 'base64').subarray(0, 8)).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
  });

  it('gives structured chart data for shown figures: line, bar, pie, box-and-whisker, scatter, superchart, unknown', async () => {
    const execution = await sbx.runCode(
      [
        'import matplotlib.pyplot as plt',
        'plt.plot([1, 2, 3], [1, 4, 9], label="squares"); plt.title("growth"); plt.xlabel("n"); plt.ylabel("n^2"); plt.show()',
        'plt.bar(["a", "b"], [3, 5], label="sales"); plt.show()',
        'plt.pie([1, 3], labels=["small", "big"]); plt.show()',
        'plt.boxplot([[1, 2, 3, 4, 5, 20], [2, 3, 4]], labels=["A", "B"]); plt.show()',
        'fig, (left, right) = plt.subplots(1, 2); left.scatter([1, 2], [3, 4], label="pts"); right.plot([0, 1]); fig.suptitle("two"); plt.show()',
        'plt.imshow([[1, 2], [3, 4]]); plt.show()',
      ].join('\n'),
    );
    expect(execution.error).toBeUndefined();
    const charts = execution.results.map((r) => r.chart as any);
    expect(charts.map((c) => c?.type)).toEqual(['line', 'bar', 'pie', 'box_and_whisker', 'superchart', 'unknown']);
    const [line, bar, pie, box, superchart] = charts;
    expect(line).toMatchObject({ title: 'growth', x_label: 'n', y_label: 'n^2', x_scale: 'linear', elements: [{ label: 'squares', points: [[1, 1], [2, 4], [3, 9]] }] });
    expect(line.x_ticks.length).toBe(line.x_tick_labels.length);
    expect(bar.elements).toEqual([{ label: 'a', group: 'sales', value: 3 }, { label: 'b', group: 'sales', value: 5 }]);
    expect(pie.elements.map((e: any) => [e.label, Math.round(e.angle)])).toEqual([['small', 90], ['big', 270]]);
    expect(box.elements[0]).toEqual({ label: 'A', min: 1, first_quartile: 2.25, median: 3.5, third_quartile: 4.75, max: 5, outliers: [20] });
    expect(superchart.title).toBe('two');
    expect(superchart.elements.map((c: any) => c.type)).toEqual(['scatter', 'line']);
    expect(superchart.elements[0].elements[0]).toEqual({ label: 'pts', points: [[1, 3], [2, 4]] });
    // Each chart still comes with its picture.
    expect(execution.results.every((r) => r.png)).toBe(true);
  });

  it('a str result is shown as its text, as the reference shows it; other values (a str in a list too) as their repr', async () => {
    const global = await sbx.runCode("import os; os.getenv('TIDEPOOL_GLOBAL')");
    expect(global.results[0]).toMatchObject({ text: 'from-create', isMainResult: true });
    const perRun = await sbx.runCode("os.getenv('PER_RUN_STR')", { envs: { PER_RUN_STR: 'overwrite' } });
    expect(perRun.text).toBe('overwrite');
    expect((await sbx.runCode("os.getenv('PER_RUN_STR', 'default')")).text).toBe('default');
    const shown = await sbx.runCode('display("shown")\n["a", 1]');
    expect(shown.results.map((r) => [r.text, r.isMainResult])).toEqual([['shown', false], ["['a', 1]", true]]);
    expect((await sbx.runCode('""')).text).toBe('');
  });

  it('an image PIL saves to a file is shown as a png result; shown and last-expression images too', async () => {
    const make = 'import numpy\nfrom PIL import Image\nimage = Image.fromarray((numpy.random.rand(16, 16, 3) * 255).astype("uint8")).convert("RGBA")\n';
    const pngOf = (execution: Execution): Buffer[] => execution.results.filter((r) => r.png).map((r) => Buffer.from(r.png!, 'base64'));
    const PNG = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
    const saved = await sbx.runCode(`${make}image.save("/tmp/pil-saved.png")`);
    expect(saved.error).toBeUndefined();
    expect(pngOf(saved).map((png) => png.subarray(0, 8))).toEqual([PNG]);
    expect(saved.results[0].isMainResult).toBe(false);
    expect((await sbx.files.read('/tmp/pil-saved.png', { format: 'bytes' })).subarray(0, 8)).toEqual(new Uint8Array(PNG));
    expect(pngOf(await sbx.runCode(`${make}image.show()\nprint("done")`))).toHaveLength(1);
    const last = await sbx.runCode(`${make}image`);
    expect(last.results.map((r) => [Boolean(r.png), r.isMainResult])).toEqual([[true, true]]);
    // Saved to a buffer (not a file): nothing is shown; a save that fails shows nothing either.
    expect(pngOf(await sbx.runCode(`${make}import io\nimage.save(io.BytesIO(), "PNG")`))).toHaveLength(0);
    const failed = await sbx.runCode(`${make}image.save("/no/such/dir/x.png")`);
    expect(failed.error?.name).toBe('FileNotFoundError');
    expect(pngOf(failed)).toHaveLength(0);
  });

  it('chart fields as the reference gives them: units from axis labels, null for what a figure lacks, categorical scales, exact pie angles', async () => {
    const chartOf = async (code: string): Promise<any> => {
      const execution = await sbx.runCode(`import matplotlib.pyplot as plt\nimport numpy as np\n${code}\nplt.show()`);
      expect(execution.error).toBeUndefined();
      return execution.results[0].chart;
    };
    const line = await chartOf('plt.plot(np.linspace(0, 6, 100), np.sin(np.linspace(0, 6, 100)), label="sin")\nplt.xlabel("Time (s)"); plt.ylabel("Amplitude [Hz]"); plt.title("waves")');
    expect(line).toMatchObject({ type: 'line', title: 'waves', x_label: 'Time (s)', y_label: 'Amplitude [Hz]', x_unit: 's', y_unit: 'Hz', x_scale: 'linear', y_scale: 'linear' });
    const log = await chartOf('plt.plot([1, 2, 3], [10, 100, 1000]); plt.yscale("log"); plt.xlabel("X-axis"); plt.ylabel("Y-axis (log scale)")');
    expect(log).toMatchObject({ title: null, x_unit: null, y_unit: 'log scale', y_scale: 'log' });
    const scatter = await chartOf('plt.scatter([1, 2], [3, 4], label="pts")');
    expect(scatter).toMatchObject({ type: 'scatter', title: null, x_label: null, y_label: null, x_unit: null, y_unit: null });
    const categorical = await chartOf('plt.plot([1, 2, 3], ["A", "B", "C"])');
    expect(categorical).toMatchObject({ type: 'line', x_scale: 'linear', y_scale: 'categorical' });
    expect(categorical.elements[0].points).toEqual([[1, 'A'], [2, 'B'], [3, 'C']]);
    const pie = await chartOf('fig, ax = plt.subplots()\nax.pie([90, 10], labels=["No", "No, in blue"], startangle=90); plt.title("tomorrow")');
    expect(pie).toEqual({ type: 'pie', title: 'tomorrow', elements: [{ label: 'No', angle: 324, radius: 1 }, { label: 'No, in blue', angle: 36, radius: 1 }] });
    const bar = await chartOf('plt.bar(["A", "B"], [100, 200]); plt.xlabel("Authors"); plt.ylabel("Sold")');
    expect(bar).toEqual({ type: 'bar', title: null, x_label: 'Authors', y_label: 'Sold', x_unit: null, y_unit: null, elements: [{ label: 'A', group: '', value: 100 }, { label: 'B', group: '', value: 200 }] });
    const box = await chartOf('fig, ax = plt.subplots()\nax.boxplot([[85, 90, 78, 92, 88], [95, 89, 76, 91, 84, 87]], labels=["Class A", "Class B"], patch_artist=True)\nax.set_title("Scores"); ax.set_xlabel("Class"); ax.set_ylabel("Score")');
    expect(box).toMatchObject({ type: 'box_and_whisker', title: 'Scores', x_label: 'Class', y_label: 'Score', x_unit: null, y_unit: null });
    expect(box.elements.map((e: any) => [e.label, e.min, e.first_quartile, e.median, e.third_quartile, e.max, e.outliers])).toEqual([
      ['Class A', 78, 85, 88, 90, 92, []],
      ['Class B', 84, 84.75, 88, 90.5, 95, [76]],
    ]);
    const superchart = await chartOf('fig, axs = plt.subplots(1, 2); fig.suptitle("many")\naxs[0].plot([0, 1]); axs[0].set_title("first")\naxs[1].scatter([1], [2]); axs[1].set_xlabel("X")');
    expect(superchart).toMatchObject({ type: 'superchart', title: 'many' });
    expect(superchart.elements.map((c: any) => [c.type, c.title, c.x_label])).toEqual([['line', 'first', null], ['scatter', null, 'X']]);
    const unknown = await chartOf('fig, ax = plt.subplots()\nax.add_artist(plt.Circle((0, 0), 1, fill=False)); plt.title("circles")');
    expect(unknown).toEqual({ type: 'unknown', title: 'circles', elements: [] });
    // An axes with nothing drawn is a line chart without lines, its scales kept (here the plot call failed after
    // the dates had set the x axis up), as the reference reads it.
    const failed = await sbx.runCode('import datetime\nplt.figure()\nplt.plot([datetime.date(2023, 9, 1)] * 3, [1, 2])\nplt.show()');
    expect(failed.error?.name).toBe('ValueError');
    expect(failed.results[0].chart).toMatchObject({ type: 'line', title: null, x_scale: 'datetime', y_scale: 'linear', elements: [] });
  });

  it('bounds huge output: the first bytes, then a note; the execution still ends', async () => {
    const execution = await sbx.runCode('print("x" * 20_000_000)\n"done"');
    const stdout = execution.logs.stdout.join('');
    expect(stdout.length).toBeLessThanOrEqual(8 * 1024 * 1024 + 1);
    expect(stdout.length).toBeGreaterThan(1024 * 1024);
    expect(execution.logs.stderr.join('')).toContain('output truncated');
    expect(execution.text).toBe('done');
  });

  it('interrupts an endless loop when the client times out; the context keeps its state', async () => {
    await sbx.runCode('survivor = 42');
    const started = Date.now();
    await expect(sbx.runCode('while True:\n    pass', { timeoutMs: 3000 })).rejects.toThrow(/timeout|timed out|aborted/i);
    expect(Date.now() - started).toBeLessThan(15_000);
    const after = await sbx.runCode('survivor');
    expect(after.text).toBe('42');
  });

  it('forged kernel messages with wrong field types are skipped; the server and the cell go on', async () => {
    const execution = await sbx.runCode(
      [
        'k = get_ipython().kernel',
        'k.session.send(k.iopub_socket, "stream", {"name": "stdout", "text": 5}, parent=k.get_parent())',
        'k.session.send(k.iopub_socket, "display_data", {"data": "not a dict"}, parent=k.get_parent())',
        'k.session.send(k.iopub_socket, "error", {"ename": 1, "evalue": None, "traceback": "x"}, parent=k.get_parent())',
        'print("after")',
        '"ok"',
      ].join('\n'),
    );
    expect(execution.logs.stdout).toEqual(['after\n']);
    expect(execution.text).toBe('ok');
    expect((await raw(sbx, '/health')).status).toBe(200);
  });

  it('output of processes the code starts joins the cell; bytes that are not UTF-8 are replaced and the stream goes on', async () => {
    const execution = await sbx.runCode('import os, subprocess\nos.write(1, b"raw \\xff\\xfe bytes\\n")\nsubprocess.run(["echo", "from a child"])\n_ = os.system("echo to stderr >&2")\n"ok"');
    expect(execution.logs.stdout.join('')).toBe('raw \uFFFD\uFFFD bytes\nfrom a child\n');
    expect(execution.logs.stderr.join('')).toBe('to stderr\n');
    expect(execution.text).toBe('ok');
    const again = await sbx.runCode('_ = os.system("echo still watched")');
    expect(again.logs.stdout).toEqual(['still watched\n']);
  });

  it('output of forked processes and of stdout=sys.stdout joins the cell; what a thread prints between cells is dropped', async () => {
    const execution = await sbx.runCode(
      [
        'import multiprocessing, subprocess, sys, threading, time',
        'p = multiprocessing.get_context("fork").Process(target=print, args=("from a fork",))',
        'p.start(); p.join()',
        'subprocess.run(["echo", "via sys.stdout"], stdout=sys.stdout)',
        'threading.Thread(target=lambda: (time.sleep(0.3), print("late"))).start()',
        '"ok"',
      ].join('\n'),
    );
    expect(execution.logs.stdout.join('')).toBe('from a fork\nvia sys.stdout\n');
    expect(execution.text).toBe('ok');
    // "late" is printed while no cell runs: dropped, not kept for the next cell.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const next = await sbx.runCode('"next"');
    expect(next.logs.stdout).toEqual([]);
    expect(next.text).toBe('next');
  });

  it('a kernel that dies gives a clear error, and the next execution gets a fresh kernel', async () => {
    await sbx.runCode('doomed = 1');
    const death = await sbx.runCode('import os, signal\nos.kill(os.getpid(), signal.SIGKILL)');
    expect(death.error?.name).toBe('InterpreterError');
    expect(death.error?.value).toMatch(/kernel .*(killed|exited)/);
    const fresh = await sbx.runCode('1 + 1');
    expect(fresh.text).toBe('2');
    const gone = await sbx.runCode('doomed');
    expect(gone.error?.name).toBe('NameError');
  });
});

describe('contexts', () => {
  it('have their own state and cwd; restart clears the state; delete removes them', async () => {
    const a = await sbx.createCodeContext({ cwd: '/tmp' });
    const b = await sbx.createCodeContext();
    expect(a).toMatchObject({ language: 'python', cwd: '/tmp' });
    expect(b.cwd).toBe('/home/user');
    await sbx.runCode('v = "a"', { context: a });
    await sbx.runCode('v = "b"', { context: b });
    expect((await sbx.runCode('v', { context: a })).text).toBe('a');
    expect((await sbx.runCode('import os; os.getcwd()', { context: a })).text).toBe('/tmp');
    expect((await sbx.runCode('v', { context: b })).text).toBe('b');

    await sbx.restartCodeContext(a);
    const restarted = await sbx.runCode('v', { context: a });
    expect(restarted.error?.name).toBe('NameError');
    expect((await sbx.runCode('import os; os.getcwd()', { context: a })).text).toBe('/tmp');

    await sbx.removeCodeContext(b);
    expect((await sbx.listCodeContexts()).map((c) => c.id)).not.toContain(b.id);
    await expect(sbx.runCode('v', { context: b })).rejects.toThrow();
    await sbx.removeCodeContext(a);
  });

  it('a context may start in /root; a directory the sandbox user cannot enter is a 400 with the reason, and no context', async () => {
    const root = await sbx.createCodeContext({ language: 'python', cwd: '/root' });
    expect(root).toMatchObject({ language: 'python', cwd: '/root' });
    expect((await sbx.listCodeContexts()).find((c) => c.id === root.id)?.cwd).toBe('/root');
    expect((await sbx.runCode('import os; os.getcwd()', { context: root })).text).toBe('/root');
    await sbx.removeCodeContext(root);

    const closed = `/srv/closed-${Math.random().toString(36).slice(2, 8)}`;
    await sbx.commands.run(`sudo mkdir -m 0700 ${closed}`);
    const before = (await sbx.listCodeContexts()).length;
    const response = await raw(sbx, '/contexts', { method: 'POST', body: JSON.stringify({ language: 'python', cwd: closed }) });
    expect(response.status).toBe(400);
    expect(await response.json()).toEqual({ code: 400, message: `'cwd' ${closed} cannot be entered by the sandbox user user (permission denied)` });
    await expect(sbx.createCodeContext({ cwd: closed })).rejects.toThrow(/400/);
    expect((await sbx.listCodeContexts()).length).toBe(before);
  });

  it('refuses bad requests with 400 and a message; unknown contexts with 404', async () => {
    const cases: [string, RequestInit, number, RegExp][] = [
      ['/execute', { method: 'POST', body: 'not json' }, 400, /not valid JSON/],
      ['/execute', { method: 'POST', body: JSON.stringify({ language: 'python' }) }, 400, /'code' is required/],
      ['/execute', { method: 'POST', body: JSON.stringify({ code: '1', language: 'cobol' }) }, 400, /not supported: use one of python, javascript, typescript, bash/],
      ['/execute', { method: 'POST', body: JSON.stringify({ code: '1', language: 'python', context_id: 'x' }) }, 400, /not both/],
      ['/execute', { method: 'POST', body: JSON.stringify({ code: '1', env_vars: { 'A=B': 'x' } }) }, 400, /not a valid environment variable name/],
      ['/execute', { method: 'POST', body: JSON.stringify({ code: '1', context_id: 'nope' }) }, 404, /context 'nope' does not exist/],
      ['/contexts', { method: 'POST', body: JSON.stringify({ cwd: 'relative' }) }, 400, /absolute path/],
      ['/contexts', { method: 'POST', body: JSON.stringify({ cwd: '/does/not/exist' }) }, 400, /not a directory/],
      ['/contexts/nope/restart', { method: 'POST' }, 404, /does not exist/],
      ['/contexts/nope', { method: 'DELETE' }, 404, /does not exist/],
      ['/contexts/%E0%A4%A', { method: 'DELETE' }, 400, /not a valid URL path segment/],
      ['/contexts', { method: 'PUT' }, 405, /not allowed/],
      ['/nowhere', { method: 'GET' }, 404, /no route GET \/nowhere/],
    ];
    for (const [path, init, status, message] of cases) {
      const response = await raw(sbx, path, init as RequestInit & { headers?: Record<string, string> });
      const body = (await response.json()) as { code: number; message: string };
      expect({ path, status: response.status }).toEqual({ path, status });
      expect(body.code).toBe(status);
      expect(body.message).toMatch(message);
    }
    await expect(sbx.runCode('1', { language: 'cobol' })).rejects.toThrow(/400/);
  });

  it('a flood of executions, abandoned executions and contexts: every call answers, the server stays up, no kernel is left behind', async () => {
    const bridges = async (): Promise<number> => Number((await sbx.commands.run("pgrep -c -f '[k]ernel_bridge.py' || true")).stdout.trim());
    const before = await bridges();
    const flood = await Promise.all(Array.from({ length: 40 }, (_, i) => sbx.runCode(`${i} * 2`)));
    expect(flood.map((e) => e.text)).toEqual(Array.from({ length: 40 }, (_, i) => String(i * 2)));
    // Clients that give up while their code runs or waits in the queue: the context survives them all.
    const abandoned = await Promise.allSettled(Array.from({ length: 6 }, () => sbx.runCode('import time\ntime.sleep(30)', { timeoutMs: 1000 })));
    expect(abandoned.every((o) => o.status === 'rejected')).toBe(true);
    expect((await sbx.runCode('"after the flood"')).text).toBe('after the flood');
    const contexts = await Promise.all(Array.from({ length: 3 }, () => sbx.createCodeContext()));
    const answers = await Promise.all(contexts.map((c, i) => sbx.runCode(`${i} + 100`, { context: c })));
    expect(answers.map((e) => e.text)).toEqual(['100', '101', '102']);
    await Promise.all(contexts.map((c) => sbx.removeCodeContext(c)));
    expect((await raw(sbx, '/health')).status).toBe(200);
    // The spare kernel the new contexts took is started again; once it is, as many kernels run as before.
    const deadline = Date.now() + 120_000;
    let now = await bridges();
    while (now !== before && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 1000));
      now = await bridges();
    }
    expect(now).toBe(before);
  }, 240_000);
});

describe('JavaScript, TypeScript and bash', () => {
  it('JavaScript: stateful, console.log is stdout, the last expression is the result, top-level await works', async () => {
    const first = await sbx.runCode('const greeting = "hi"\nconsole.log(greeting)\nlet n = await Promise.resolve(41)\nn + 1', { language: 'js' });
    expect(first.logs.stdout).toEqual(['hi\n']);
    expect(first.text).toBe('42');
    const second = await sbx.runCode('function double(v) { return v * 2 }\ndouble(n)', { language: 'javascript' });
    expect(second.text).toBe('82');
    const error = await sbx.runCode('null.x', { language: 'js' });
    expect(error.error?.name).toBe('TypeError');
    // Cell code can write to the worker's IPC channel itself: malformed messages are ignored.
    const forged = await sbx.runCode('process.send(null); process.send({ ev: "stdout", text: {} }); process.send({ ev: "done", id: "x" }); "fine"', { language: 'js' });
    expect(forged.text).toBe('fine');
  });

  it('TypeScript: types are stripped, imports work and stay for the next execution', async () => {
    const ctx = await sbx.createCodeContext({ language: 'ts', cwd: '/tmp' });
    expect(ctx.language).toBe('typescript');
    const first = await sbx.runCode('import path from "node:path"\ninterface P { x: number }\nconst p: P = { x: 2 }\np.x * 3', { context: ctx });
    expect(first.text).toBe('6');
    const second = await sbx.runCode('path.join(process.cwd(), "f")', { context: ctx });
    expect(second.text).toBe('/tmp/f');
    const syntax = await sbx.runCode('const = ;', { context: ctx });
    expect(syntax.error?.name).toBe('SyntaxError');
    await sbx.removeCodeContext(ctx);
  });

  it('a JavaScript endless loop is interrupted on timeout and its context survives', async () => {
    const ctx = await sbx.createCodeContext({ language: 'javascript' });
    await sbx.runCode('let kept = "still here"', { context: ctx });
    await expect(sbx.runCode('while (true) {}', { context: ctx, timeoutMs: 2000 })).rejects.toThrow();
    expect((await sbx.runCode('kept', { context: ctx })).text).toBe('still here');
    await sbx.removeCodeContext(ctx);
  });

  it('bash: stateful shell, output streamed, a failing command is an error', async () => {
    const ctx = await sbx.createCodeContext({ language: 'bash' });
    const first = await sbx.runCode('cd /tmp && GREETING=hello\necho "$GREETING from $(pwd)"', { context: ctx });
    expect(first.logs.stdout.join('')).toBe('hello from /tmp\n');
    const second = await sbx.runCode('echo "$GREETING $PER_RUN"; ls /nowhere', { context: ctx, envs: { PER_RUN: 'x' } });
    expect(second.logs.stdout.join('')).toBe('hello x\n');
    expect(second.logs.stderr.join('')).toContain('/nowhere');
    expect(second.error?.name).toBe('ExitCodeError');
    const third = await sbx.runCode('echo "[$PER_RUN]"', { context: ctx });
    expect(third.logs.stdout.join('')).toBe('[]\n');
    // An interrupt (the client's timeout) restarts the shell; the context stays usable.
    await expect(sbx.runCode('sleep 100', { context: ctx, timeoutMs: 2000 })).rejects.toThrow();
    expect((await sbx.runCode('echo alive', { context: ctx })).logs.stdout.join('')).toBe('alive\n');
    expect((await sbx.runCode('echo a\u0000b', { context: ctx })).error?.value).toMatch(/NUL character/);
    await sbx.removeCodeContext(ctx);
  });
});

describe('sandboxes', () => {
  it('allowPublicTraffic=false: the SDK sends the traffic token; requests without it are refused', async () => {
    const privateSbx = await create({ network: { allowPublicTraffic: false } });
    expect(privateSbx.trafficAccessToken).toBeTruthy();
    expect((await privateSbx.runCode('6 * 7')).text).toBe('42');
    const refused = await raw(privateSbx, '/health');
    expect(refused.status).toBe(403);
    await privateSbx.kill();
  });

  it('a code-interpreter server that is killed is started again (with fresh contexts)', async () => {
    // Anchored: the start command's own shell loop has the server's path in its command line too.
    const before = await sbx.commands.run("pgrep -f '^/opt/tidepool/bin/node /opt/tidepool-code-interpreter/server'");
    await sbx.commands.run("pkill -KILL -f '^/opt/tidepool/bin/node /opt/tidepool-code-interpreter/server'", { user: 'root' });
    const deadline = Date.now() + 120_000;
    let text: string | undefined;
    while (Date.now() < deadline && text !== '3') {
      text = await sbx.runCode('1 + 2').then((e) => e.text, () => undefined);
      if (text !== '3') await new Promise((resolve) => setTimeout(resolve, 500));
    }
    expect(text).toBe('3');
    const after = await sbx.commands.run("pgrep -f '^/opt/tidepool/bin/node /opt/tidepool-code-interpreter/server'");
    expect(after.stdout.trim()).not.toBe(before.stdout.trim());
  }, 180_000);

  it('a sandbox killed during an execution ends the call with an error', async () => {
    const doomed = await create();
    const running: Promise<Execution | Error> = doomed.runCode('import time\ntime.sleep(60)').catch((error: Error) => error);
    await new Promise((resolve) => setTimeout(resolve, 1500));
    await doomed.kill();
    const outcome = await running;
    expect(outcome).toBeInstanceOf(Error);
    expect((outcome as Error).message).toMatch(/killed/);
  });
});
