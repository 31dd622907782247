/** One step down: a property name (escaped when spelled out), an index, or a lazy label. */
export type PointerSegment = string | number | (() => string);

/**
 * Where a recursive walk over a value is, as JSON Pointer (RFC 6901) segments. Pushing and
 * popping costs no string building: the path is only spelled out (`toString`) for an error
 * message, so a value that walks fine allocates no paths.
 */
export class PointerTrail {
  readonly segments: PointerSegment[] = [];

  /** The path of the first `depth` segments, e.g. `/a/0/b`; `''` for the root. */
  toString(depth = this.segments.length): string {
    let path = '';
    for (const segment of this.segments.slice(0, depth)) {
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
