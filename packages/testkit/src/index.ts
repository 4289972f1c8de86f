export * as McpServer from "./McpServer.js"
export * as RealCodex from "./RealCodex.js"
export * as ScriptedModel from "./ScriptedModel.js"
export * as Step from "./Step.js"
export * as FakeAppServer from "./FakeAppServer.js"
export * as TranscriptReplay from "./TranscriptReplay.js"
export * as PinnedSchema from "./PinnedSchema.js"
export * as ProcessTree from "./ProcessTree.js"
/** A real child process for a test, in its own process group, its output watched, stopped with what it started. */
export * as TestProcess from "./TestProcess.js"
/** Bounded waits woken by what they wait on (`wake()`), for a test's state changed by callbacks. */
export * as WokenWait from "./WokenWait.js"
export * as Adversarial from "./Adversarial.js"
