// Types of scripts/node-runtime.mjs (plain JavaScript: it runs before anything is compiled).
export declare const IMAGE_NODE: { version: string; integrity: Record<string, string> };
export declare function imageNodeDir(): string;
