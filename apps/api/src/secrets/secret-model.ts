/** A secret as every route shows it: metadata only, never the value. */
export interface SecretInfo {
  secretID: string;
  name: string;
  currentVersion: number;
  metadata: Record<string, string>;
  createdAt: string;
  updatedAt: string;
}
