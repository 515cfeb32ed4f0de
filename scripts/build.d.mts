// Types of scripts/build.mjs (plain JavaScript: it runs before anything is compiled).
export declare const OUT_DIR: string;
export declare const ENTRIES: Record<string, string>;
export declare function buildAll(): Promise<void>;
export declare function builtLine(started: number): string;
