/** envd routes that only the control plane may call; refused at the edge on the envd port (reference §2.10). */
const CONTROL_ROUTES = new Set(['/init', '/freeze', '/unfreeze', '/collapse', '/fsfreeze', '/fsthaw', '/upgrade']);

/** The path of a request target, percent-decoded and cleaned like Go's `path.Clean`. */
export function cleanRequestPath(url: string): string {
  let path = url;
  const cut = path.search(/[?#]/);
  if (cut !== -1) path = path.slice(0, cut);
  // Absolute-form targets (`http://host/path`) carry the path after the authority.
  const scheme = /^[a-z][a-z0-9+.-]*:\/\/[^/]*/i.exec(path);
  if (scheme) path = path.slice(scheme[0].length);
  try {
    path = decodeURIComponent(path);
  } catch {
    // Keep the raw form: envd would fail to route a malformed escape anyway.
  }
  const out: string[] = [];
  for (const segment of path.split('/')) {
    if (segment === '' || segment === '.') continue;
    if (segment === '..') out.pop();
    else out.push(segment);
  }
  return `/${out.join('/')}`;
}

export function isEnvdControlRoute(url: string): boolean {
  return CONTROL_ROUTES.has(cleanRequestPath(url).toLowerCase());
}
