/**
 * Test extension that does nothing: a profile may grant it, and a run that
 * loads it shows that a granted extension still runs.
 */
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";

export default function noop(_pi: ExtensionAPI) {}
