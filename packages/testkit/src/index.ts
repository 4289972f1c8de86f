export * as McpServer from "./McpServer.js"
export * as RealCodex from "./RealCodex.js"
export * as ScriptedModel from "./ScriptedModel.js"
export * as Step from "./Step.js"
