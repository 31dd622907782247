/** One step down: a property name (escaped when spelled out), an index, or a lazy label. */
export type PointerSegment = string | number | (() => string);

/**
 * Where a recursive walk over a value is, as JSON Pointer (RFC 6901) segments. Pushing and
 * popping costs no string building: the path is only spelled out (`toString`) for an error
 * message, so a value that walks fine allocates no paths.
 */
export class PointerTrail {
  readonly segments: PointerSegment[] = [];

  /**
   * The path of the first `depth` segments, e.g. `/a/0/b`, counted from segment `from`
   * (below what a caller wrapped around its value); `''` for the root.
   */
  toString(depth = this.segments.length, from = 0): string {
    let path = '';
    for (const segment of this.segments.slice(from, depth)) {
      path += `/${
        typeof segment === 'string'
          ? escapeSegment(segment)
          : typeof segment === 'number'
            ? segment
            : segment()
      }`;
    }
    return path;
  }
}

/** JSON Pointer escaping (RFC 6901), so a key containing `/` cannot fake a deeper path. */
export function escapeSegment(segment: string): string {
  return segment.replaceAll('~', '~0').replaceAll('/', '~1');
}

/** The longest path an error message spells out; the error's `path` keeps all of it. */
const SHOWN_PATH = 160;

/**
 * A path as an error message shows it: whole when short, else its start and how many
 * levels it has. A path can be as long as the data (its member names, at up to 1,000
 * levels), and messages go back to the client and into logs.
 */
export function pathInMessage(path: string): string {
  if (path.length <= SHOWN_PATH) return path;
  let levels = 0;
  for (let index = 0; index < path.length; index++) if (path.charCodeAt(index) === 0x2f) levels++;
  return `${path.slice(0, SHOWN_PATH)}… (${levels} levels)`;
}
