/**
 * Failures of the volume-content API. Its error body is `{code: string, message}` (not the platform's
 * integer `code`): `code` is the HTTP status as a string, as the reference content API and the SDK's
 * own mock answer. The SDK branches on the HTTP status only (404 → `VolumePathNotFoundError`,
 * 401 → `AuthenticationError`, anything else → `VolumeError("<status>: <message>")`).
 */
export class ContentError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = 'ContentError';
  }
}

export const badRequest = (message: string) => new ContentError(400, message);
export const unauthorized = (message: string) => new ContentError(401, message);
export const forbidden = (message: string) => new ContentError(403, message);
export const pathNotFound = (path: string) => new ContentError(404, `path "${path}" not found`);
export const pathConflict = (message: string) => new ContentError(409, message);
export const uploadTooLarge = (path: string, maxBytes: number) =>
  new ContentError(413, `the upload to "${path}" is larger than ${maxBytes} bytes (TIDEPOOL_VOLUME_UPLOAD_MAX_BYTES); nothing was written`);
export const insufficientStorage = (path: string) =>
  new ContentError(507, `not enough space in the volume to write "${path}" (the disk or the volume's quota is full); nothing was written`);

export function contentErrorBody(error: ContentError): { code: string; message: string } {
  return { code: String(error.status), message: error.message };
}

/**
 * Maps a file-system failure on `path` (as the client named it) to a content error; undefined for
 * failures that are the platform's own (answered 500 and logged).
 */
export function fromFsError(error: unknown, path: string): ContentError | undefined {
  if (error instanceof ContentError) return error;
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  switch (code) {
    case 'ENOENT':
      return pathNotFound(path);
    case 'ENOTDIR':
      return new ContentError(404, `path "${path}" not found (a parent is not a directory)`);
    case 'EEXIST':
      return pathConflict(`path "${path}" already exists`);
    case 'ENOTEMPTY':
      return pathConflict(`directory "${path}" is not empty`);
    case 'EISDIR':
      return pathConflict(`path "${path}" is a directory`);
    case 'ELOOP':
      return forbidden(`path "${path}" goes through a symbolic link; the volume-content API never follows links`);
    case 'ENAMETOOLONG':
      return badRequest(`path "${path}" is too long`);
    case 'ENOSPC':
    case 'EDQUOT':
    case 'EFBIG':
      return insufficientStorage(path);
    case 'EPERM':
    case 'EACCES':
      return forbidden(`the platform may not change "${path}" (${code}); ownership changes need the platform to run as root`);
    default:
      return undefined;
  }
}
