/**
 * Reading untrusted JSON: what a kernel sends may come from a newer or older kernel, or be
 * hand-edited in a saved notebook. These readers never throw; they return a value of the
 * expected type or a fallback.
 */

/** An untrusted object that may carry the fields of `T`, each of any type: a reader of it
 * can only name fields `T` has (the generated payload types of schema.ts). */
export type Loose<T> = { [K in keyof T]?: unknown };

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A finite number, or null. */
export function finiteNumber(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

/** A string, or null. */
export function optionalText(value: unknown): string | null {
  return typeof value === 'string' ? value : null;
}

/** The strings of a list (other items skipped; not a list: none). */
export function strings(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((item): item is string => typeof item === 'string') : [];
}

/** The string values of an object, by key (other values skipped; not an object: none). */
export function stringMap(value: unknown): Record<string, string> {
  return isRecord(value)
    ? Object.fromEntries(Object.entries(value).filter((e): e is [string, string] => typeof e[1] === 'string'))
    : {};
}

/** The first of `keys` holding a count (a finite number >= 0), else 0. */
export function count(data: Record<string, unknown>, ...keys: string[]): number {
  for (const key of keys) {
    const value = finiteNumber(data[key]);
    if (value !== null && value >= 0) {
      return value;
    }
  }
  return 0;
}
