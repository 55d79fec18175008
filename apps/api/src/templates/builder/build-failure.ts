/** How a build fails: the message is what the user sees as `reason.message`. */

export class BuildFailure extends Error {
  constructor(
    message: string,
    /** `base`, `finalize`, or the index of the failing step (as a string). */
    readonly step?: string,
  ) {
    super(message);
    this.name = 'BuildFailure';
  }
}

/** The build was stopped through its AbortSignal (template deleted, shutdown). */
export class BuildCancelled extends BuildFailure {
  constructor(step?: string, reason = 'the build was cancelled') {
    super(reason, step);
    this.name = 'BuildCancelled';
  }
}
