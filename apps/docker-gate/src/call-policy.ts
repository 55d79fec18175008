/**
 * Which Docker Engine API calls the gate forwards: exactly the ones the platform makes (apps/api/src/runtime/docker,
 * templates/build through the image engine, the events follower, the firewall helper), matched by method and
 * path after an optional `/v1.NN` prefix. Everything else is refused. Some calls are only decided once the
 * gate knows more: the body of a create, or the labels of the container (or exec, or network) they act on.
 */

import { DEFAULT_IMAGE_NAMES, type ImageNames, imageNameWriteProblem } from './image-repositories.ts';
import { protectedWrite } from './protected-images.ts';

/** What the gate must look at before forwarding an allowed call. */
export type BodyCheck = 'container-create' | 'exec-create' | 'network-create' | 'empty';
export type TargetKind = 'container' | 'exec' | 'network';

export interface AllowedCall {
  allowed: true;
  /** Short name of the call, for logs. */
  call: string;
  /** Path as asked (version prefix kept). */
  path: string;
  /** The container, exec or network the call acts on: checked (labels) before the call is forwarded. */
  target?: { kind: TargetKind; ref: string; where: 'path' | 'query' };
  body?: BodyCheck;
}

export interface RefusedCall {
  allowed: false;
  status: 400 | 403;
  message: string;
}

export type CallDecision = AllowedCall | RefusedCall;

interface Route {
  method: string;
  pattern: RegExp;
  call: string;
  /** The capture group is the reference of this kind of object. */
  target?: TargetKind;
  body?: BodyCheck;
  /** Extra checks on the query string; returns a refusal message. */
  query?: (query: URLSearchParams) => string | undefined;
}

const ID = '([A-Za-z0-9][A-Za-z0-9_.-]*)';

const pullOrImport = (query: URLSearchParams): string | undefined => {
  const source = query.get('fromSrc');
  if (source !== null && source !== '-') return 'images/create may import only from the request body (fromSrc=-), never from a URL';
  if (source === null && !query.get('fromImage')) return 'images/create needs fromImage or fromSrc=-';
  return undefined;
};

const commitOf = (query: URLSearchParams): string | undefined => (query.get('container') ? undefined : 'commit needs a container');

const ROUTES: Route[] = [
  { method: 'GET', pattern: /^\/_ping$/, call: 'ping' },
  { method: 'HEAD', pattern: /^\/_ping$/, call: 'ping' },
  { method: 'GET', pattern: /^\/version$/, call: 'version' },
  { method: 'GET', pattern: /^\/info$/, call: 'info' },
  { method: 'GET', pattern: /^\/events$/, call: 'events' },
  // containers
  { method: 'GET', pattern: /^\/containers\/json$/, call: 'container list' },
  { method: 'POST', pattern: /^\/containers\/create$/, call: 'container create', body: 'container-create' },
  { method: 'GET', pattern: new RegExp(`^/containers/${ID}/json$`), call: 'container inspect', target: 'container' },
  { method: 'POST', pattern: new RegExp(`^/containers/${ID}/start$`), call: 'container start', target: 'container', body: 'empty' },
  { method: 'POST', pattern: new RegExp(`^/containers/${ID}/stop$`), call: 'container stop', target: 'container' },
  { method: 'POST', pattern: new RegExp(`^/containers/${ID}/kill$`), call: 'container kill', target: 'container' },
  { method: 'POST', pattern: new RegExp(`^/containers/${ID}/pause$`), call: 'container pause', target: 'container' },
  { method: 'POST', pattern: new RegExp(`^/containers/${ID}/unpause$`), call: 'container unpause', target: 'container' },
  { method: 'POST', pattern: new RegExp(`^/containers/${ID}/wait$`), call: 'container wait', target: 'container' },
  { method: 'GET', pattern: new RegExp(`^/containers/${ID}/logs$`), call: 'container logs', target: 'container' },
  { method: 'GET', pattern: new RegExp(`^/containers/${ID}/export$`), call: 'container export', target: 'container' },
  { method: 'GET', pattern: new RegExp(`^/containers/${ID}/archive$`), call: 'archive get', target: 'container' },
  { method: 'HEAD', pattern: new RegExp(`^/containers/${ID}/archive$`), call: 'archive stat', target: 'container' },
  { method: 'PUT', pattern: new RegExp(`^/containers/${ID}/archive$`), call: 'archive put', target: 'container' },
  { method: 'POST', pattern: new RegExp(`^/containers/${ID}/attach$`), call: 'container attach', target: 'container' },
  { method: 'POST', pattern: new RegExp(`^/containers/${ID}/resize$`), call: 'container resize', target: 'container' },
  { method: 'DELETE', pattern: new RegExp(`^/containers/${ID}$`), call: 'container remove', target: 'container' },
  { method: 'POST', pattern: new RegExp(`^/containers/${ID}/exec$`), call: 'exec create', target: 'container', body: 'exec-create' },
  { method: 'POST', pattern: new RegExp(`^/exec/${ID}/start$`), call: 'exec start', target: 'exec' },
  { method: 'POST', pattern: new RegExp(`^/exec/${ID}/resize$`), call: 'exec resize', target: 'exec' },
  { method: 'GET', pattern: new RegExp(`^/exec/${ID}/json$`), call: 'exec inspect', target: 'exec' },
  { method: 'POST', pattern: /^\/commit$/, call: 'commit', query: commitOf },
  // images (names carry slashes, colons and digests)
  { method: 'GET', pattern: /^\/images\/json$/, call: 'image list' },
  { method: 'POST', pattern: /^\/images\/create$/, call: 'image pull/import', query: pullOrImport },
  { method: 'GET', pattern: /^\/images\/(.+)\/json$/, call: 'image inspect' },
  { method: 'POST', pattern: /^\/images\/(.+)\/tag$/, call: 'image tag' },
  { method: 'DELETE', pattern: /^\/images\/(.+)$/, call: 'image remove' },
  // networks
  { method: 'GET', pattern: /^\/networks$/, call: 'network list' },
  { method: 'GET', pattern: new RegExp(`^/networks/${ID}$`), call: 'network inspect' },
  { method: 'POST', pattern: /^\/networks\/create$/, call: 'network create', body: 'network-create' },
  { method: 'DELETE', pattern: new RegExp(`^/networks/${ID}$`), call: 'network remove', target: 'network' },
];

/**
 * API versions below 1.24 let `POST /containers/{id}/start` carry a HostConfig (privileges after the create
 * check); the gate refuses to speak them.
 */
const MIN_MINOR_VERSION = 24;

/** Only characters that appear in engine paths: ids, names, image references. Anything else is refused. */
const SAFE_PATH = /^\/[A-Za-z0-9._:@/+-]*$/;

/**
 * Refuses writes of an image name outside the platform's repositories or onto a protected one: tag (a repo is
 * required), commit and import (when they name the result; unnamed results are plain image ids). A pull may
 * fetch any name but a protected one (template builds pull the base images users name; a pulled name holds
 * what its registry serves). A removal is judged once the gate has inspected the image (image-repositories.ts).
 */
function imageWriteProblem(call: string, match: RegExpExecArray, query: URLSearchParams, names: ImageNames): string | undefined {
  const repo = query.get('repo');
  const tag = query.get('tag');
  switch (call) {
    case 'image tag':
      return repo ? imageNameWriteProblem(names, repo, tag) : 'image tag needs repo';
    case 'commit':
      return repo ? imageNameWriteProblem(names, repo, tag) : undefined;
    case 'image pull/import':
      if (query.get('fromSrc') === null) return protectedWrite(names.protectedImages, query.get('fromImage'), tag);
      return repo ? imageNameWriteProblem(names, repo, tag) : undefined;
    case 'image remove':
      return protectedWrite(names.protectedImages, match[1]);
    default:
      return undefined;
  }
}

/**
 * Decides one request by method and URL (`/v1.41/containers/x/json?all=1`). Pure. `images`: the repositories
 * calls may write image names in, and the stack's names (the firewall helper's image …) none may touch.
 */
export function decideCall(method: string, rawUrl: string, images: ImageNames = DEFAULT_IMAGE_NAMES): CallDecision {
  const queryAt = rawUrl.indexOf('?');
  const rawPath = queryAt < 0 ? rawUrl : rawUrl.slice(0, queryAt);
  const query = new URLSearchParams(queryAt < 0 ? '' : rawUrl.slice(queryAt + 1));
  if (!SAFE_PATH.test(rawPath) || rawPath.includes('//') || rawPath.split('/').some((s) => s === '.' || s === '..')) {
    return { allowed: false, status: 400, message: `malformed path ${JSON.stringify(rawPath.slice(0, 200))}` };
  }
  let path = rawPath;
  const version = /^\/v(\d+)\.(\d+)(\/.*)$/.exec(rawPath);
  if (version) {
    if (Number(version[1]) !== 1 || Number(version[2]) < MIN_MINOR_VERSION) {
      return { allowed: false, status: 400, message: `API version v${version[1]}.${version[2]} is not supported by the docker gate (1.${MIN_MINOR_VERSION} or later)` };
    }
    path = version[3]!;
  }
  for (const route of ROUTES) {
    if (route.method !== method) continue;
    const match = route.pattern.exec(path);
    if (!match) continue;
    const problem = route.query?.(query) ?? imageWriteProblem(route.call, match, query, images);
    if (problem) return { allowed: false, status: 403, message: `docker gate: ${problem}` };
    const decision: AllowedCall = { allowed: true, call: route.call, path: rawPath };
    if (route.target) decision.target = { kind: route.target, ref: match[1]!, where: 'path' };
    if (route.call === 'commit') decision.target = { kind: 'container', ref: query.get('container')!, where: 'query' };
    if (route.body) decision.body = route.body;
    return decision;
  }
  return { allowed: false, status: 403, message: `docker gate: ${method} ${path} is not a call the Tidepool platform makes` };
}

/** The URL with the target reference replaced by the full id the gate checked (no name swap in between). */
export function withTargetId(rawUrl: string, decision: AllowedCall, id: string): string {
  const target = decision.target;
  if (!target) return rawUrl;
  const queryAt = rawUrl.indexOf('?');
  const path = queryAt < 0 ? rawUrl : rawUrl.slice(0, queryAt);
  const query = new URLSearchParams(queryAt < 0 ? '' : rawUrl.slice(queryAt + 1));
  if (target.where === 'query') {
    query.set('container', id);
    return `${path}?${query.toString()}`;
  }
  const segments = path.split('/');
  const kindSegment = target.kind === 'container' ? 'containers' : target.kind === 'exec' ? 'exec' : 'networks';
  const index = segments.indexOf(kindSegment) + 1;
  if (index === 0 || segments[index] !== target.ref) return rawUrl;
  segments[index] = id;
  return segments.join('/') + (queryAt < 0 ? '' : rawUrl.slice(queryAt));
}
