import { type EntryInfo, FileType } from '@tidepool/protocol/filesystem';
import { bytes, fill, h, notice } from '../dom.ts';
import { downloadFile, type EnvdTarget, envdClients, uploadFile, userHeader } from '../envd.ts';

const HOME = '/home/user';

function parentOf(path: string): string {
  const trimmed = path.replace(/\/+$/, '');
  const cut = trimmed.lastIndexOf('/');
  return cut <= 0 ? '/' : trimmed.slice(0, cut);
}

function join(dir: string, name: string): string {
  return dir.endsWith('/') ? `${dir}${name}` : `${dir}/${name}`;
}

/** A files browser on envd's filesystem service (ListDir) and its /files download and upload, as the sandbox user. */
export function filesView(target: EnvdTarget): { element: HTMLElement; dispose(): void } {
  const clients = envdClients(target);
  let current = HOME;
  let disposed = false;
  const pathInput = h('input', { id: 'files-path', value: current, autocomplete: 'off', spellcheck: 'false' });
  const status = h('div', { class: 'status-line', 'aria-live': 'polite' });
  const list = h('tbody', {});
  const upload = h('input', { id: 'files-upload', type: 'file', multiple: true });
  const report = (text: string, kind: 'info' | 'error' = 'info'): void => fill(status, notice(text, kind));

  const open = async (path: string): Promise<void> => {
    report(`Listing ${path}…`);
    try {
      const response = await clients.filesystem.listDir({ path, depth: 1 }, { headers: userHeader() });
      if (disposed) return;
      current = path;
      pathInput.value = path;
      const entries = [...response.entries].sort((a, b) => Number(b.type === FileType.DIRECTORY) - Number(a.type === FileType.DIRECTORY) || a.name.localeCompare(b.name));
      fill(list, path === '/' ? null : upRow(parentOf(path)), ...entries.map(row));
      fill(status);
    } catch (err) {
      report(`Could not list ${path}: ${(err as Error).message}`, 'error');
    }
  };

  const download = async (entry: EntryInfo): Promise<void> => {
    report(`Downloading ${entry.path}…`);
    try {
      const blob = await downloadFile(target, entry.path);
      const url = URL.createObjectURL(blob);
      const link = h('a', { href: url, download: entry.name });
      document.body.appendChild(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
      report(`Downloaded ${entry.path} (${bytes(blob.size)})`);
    } catch (err) {
      report(`Download of ${entry.path} failed: ${(err as Error).message}`, 'error');
    }
  };

  const upRow = (parent: string): HTMLTableRowElement =>
    h('tr', { 'data-path': parent }, h('td', { colspan: 6 }, h('button', { type: 'button', class: 'link', onclick: () => void open(parent) }, '.. (up)')));

  const row = (entry: EntryInfo): HTMLTableRowElement => {
    const isDir = entry.type === FileType.DIRECTORY;
    const name = isDir
      ? h('button', { type: 'button', class: 'link', onclick: () => void open(entry.path) }, `${entry.name}/`)
      : h('span', {}, entry.name, entry.symlinkTarget ? ` → ${entry.symlinkTarget}` : '');
    return h(
      'tr',
      { 'data-path': entry.path },
      h('td', {}, name),
      h('td', {}, isDir ? '' : bytes(Number(entry.size))),
      h('td', { class: 'mono' }, entry.permissions),
      h('td', {}, entry.owner),
      h('td', {}, entry.modifiedTime ? new Date(Number(entry.modifiedTime.seconds) * 1000).toLocaleString() : ''),
      h('td', {}, entry.type === FileType.FILE ? h('button', { type: 'button', onclick: () => void download(entry), 'aria-label': `Download ${entry.name}` }, 'Download') : ''),
    );
  };

  const go = h('form', { class: 'files-path' }, h('label', { for: 'files-path' }, 'Directory'), pathInput, h('button', { type: 'submit' }, 'Open'));
  go.addEventListener('submit', (event) => {
    event.preventDefault();
    void open(pathInput.value.trim() || HOME);
  });
  upload.addEventListener('change', () => {
    const files = [...(upload.files ?? [])];
    if (files.length === 0) return;
    const dir = current;
    report(`Uploading ${files.length} file(s) to ${dir}…`);
    Promise.all(files.map((file) => uploadFile(target, join(dir, file.name), file)))
      .then(async () => {
        upload.value = '';
        await open(dir);
        report(`Uploaded ${files.map((f) => f.name).join(', ')} to ${dir}`);
      })
      .catch((err: unknown) => report(`Upload failed: ${(err as Error).message}`, 'error'));
  });

  void open(current);
  const element = h(
    'section',
    { class: 'files', 'aria-label': 'Files' },
    go,
    h('p', {}, h('label', { for: 'files-upload' }, 'Upload into this directory: '), upload),
    status,
    h('div', { class: 'table-wrap' }, h('table', { class: 'file-list' }, h('thead', {}, h('tr', {}, ...['Name', 'Size', 'Mode', 'Owner', 'Modified', ''].map((t) => h('th', { scope: 'col' }, t)))), list)),
  );
  return {
    element,
    dispose() {
      disposed = true;
    },
  };
}
