/*
 * A breaking change is acknowledged by a line of CHANGELOG.md (Keep a Changelog's layout) under
 * the next version, `## [Unreleased]`, naming its coordinate in backticks:
 * "- Removed `Head.arUrl` (deprecated since 0.3.0; no uses in 30 days)." Only that section
 * counts: a line under a released version acknowledged a change that version shipped.
 */

/** The text of the `## [Unreleased]` section of a changelog (empty when it has none). */
export function unreleasedSection(changelog: string): string {
  const lines = changelog.split(/\r?\n/);
  const start = lines.findIndex((line) => /^##\s+\[?unreleased\]?\s*$/i.test(line.trim()));
  if (start < 0) return '';
  const end = lines.findIndex((line, i) => i > start && /^##\s/.test(line));
  return lines.slice(start + 1, end < 0 ? undefined : end).join('\n');
}

/** The coordinates the Unreleased section names in backticks. */
export function acknowledgedCoordinates(changelog: string): Set<string> {
  return new Set([...unreleasedSection(changelog).matchAll(/`([^`\n]+)`/g)].map(([, named]) => named!.trim()));
}

/** The newest released version the changelog records (its first `## [x.y.z]` heading), if any. */
export function lastRelease(changelog: string): string | undefined {
  for (const line of changelog.split(/\r?\n/)) {
    const match = /^##\s+\[?(\d+\.\d+\.\d+[^\]\s]*)\]?/.exec(line);
    if (match !== null) return match[1];
  }
  return undefined;
}
