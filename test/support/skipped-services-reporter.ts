import type { Reporter, TestModule, TestSuite, Vitest } from 'vitest/node';

/**
 * Lists, after vitest's own summary, every suite skipped because a program it needs is not
 * installed (`describeWithRedis` / `describeWithChromium`): one line each, with what to install.
 */
export default class SkippedServicesReporter implements Reporter {
  private logger: Vitest['logger'] | undefined;

  onInit(vitest: Vitest): void {
    this.logger = vitest.logger;
  }

  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    const lines = testModules.flatMap((module) =>
      [...module.children.allSuites()]
        .filter(isOutermostSkipped)
        .map((suite) => `  ${module.relativeModuleId} > ${suite.fullName}: ${suite.meta().skippedForMissingService}`),
    );
    if (lines.length === 0) return;
    const log = (line: string) => this.logger?.log(line);
    log(
      `\nSkipped ${lines.length} suite(s) whose programs are not installed (REQUIRE_SERVICES=1 makes that a failure, as in CI):`,
    );
    for (const line of lines) log(line);
  }
}

/** A suite skipped for a missing program, not nested in another such suite (nested suites inherit the meta). */
function isOutermostSkipped(suite: TestSuite): boolean {
  if (suite.state() !== 'skipped' || suite.meta().skippedForMissingService === undefined) return false;
  return suite.parent.type === 'module' || suite.parent.meta().skippedForMissingService === undefined;
}
