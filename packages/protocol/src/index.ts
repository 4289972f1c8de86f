export * as JsonRpc from "./JsonRpc.js"
export * as Decision from "./Decision.js"
export * as PermissionsGrant from "./PermissionsGrant.js"
export * as ServerRequests from "./ServerRequests.js"
