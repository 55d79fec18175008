/** What a provisioning run did (one short phrase per change) and what it could not do well. */
export class ProvisionReport {
  readonly changes: string[] = [];
  readonly warnings: string[] = [];

  change(what: string): void {
    this.changes.push(what);
  }

  warn(what: string): void {
    this.warnings.push(what);
  }
}
