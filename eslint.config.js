// The one lint configuration of the repository (`npm run lint`). TypeScript is linted with type
// information, from the root tsconfig.json (one program for the whole tree: a single type-check, as
// `npm run typecheck` does), for what the compiler lets through: promises nobody awaits or handles,
// promises passed where a plain callback is expected, and code nothing uses. Formatting is Prettier's
// alone (`npm run format`); eslint-config-prettier, last, keeps every rule about layout off.
//
// typescript-eslint needs TypeScript's JavaScript API, which TypeScript 7 (the Go compiler, which `tsc`
// runs) does not have yet: package.json installs TypeScript 7 as `@typescript/native` and names
// TypeScript 6's compatibility package `typescript`, the one typescript-eslint loads.
import js from "@eslint/js";
import prettier from "eslint-config-prettier";
import { defineConfig } from "eslint/config";
import globals from "globals";
import tseslint from "typescript-eslint";

/** Names starting with `_` are unused on purpose (a placeholder in a signature or a destructuring). */
const UNUSED_ON_PURPOSE = "^_";

export default defineConfig(
  {
    // Generated code (gen/, `npm run generate`), build output and the benchmark's scratch space.
    ignores: ["gen/", "dist/", ".dist-staging-*/", "**/node_modules/", ".bench/", ".artifacts/", "data/"],
  },
  {
    linterOptions: {
      // A disable comment that no longer silences anything goes, so none outlives its reason.
      reportUnusedDisableDirectives: "error",
      reportUnusedInlineConfigs: "error",
    },
  },
  js.configs.recommended,
  {
    rules: {
      // Input validation here matches control characters on purpose (names, headers, import lines).
      "no-control-regex": "off",
      // `let x;` assigned once but read earlier (by a callback made before it) cannot be a const.
      "prefer-const": ["error", { ignoreReadBeforeAssign: true }],
    },
  },
  {
    files: ["**/*.ts", "**/*.mts"],
    extends: [tseslint.configs.recommended],
    languageOptions: {
      parserOptions: {
        project: "./tsconfig.json",
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      // Promises: each one awaited, returned, handled, or discarded on purpose with `void`.
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/no-misused-promises": "error",
      // A list that mixes promises with plain values (`cond ? call() : undefined`) is still awaited in full.
      "@typescript-eslint/await-thenable": ["error", { allowMixedPromiseArrays: true }],
      // A promise returned from inside `try` without `await` escapes its `catch` and `finally`.
      "@typescript-eslint/return-await": ["error", "error-handling-correctness-only"],
      // Errors are Error objects, so the catalogue's mapping (and a stack) always has one to read.
      "@typescript-eslint/only-throw-error": "error",
      // A value of unknown type passed on is a failure caught elsewhere, as only-throw-error allows too.
      "@typescript-eslint/prefer-promise-reject-errors": [
        "error",
        { allowThrowingAny: true, allowThrowingUnknown: true },
      ],
      // Code nothing uses: variables, imports, parameters, caught errors, private members, assertions.
      "@typescript-eslint/no-unused-vars": [
        "error",
        {
          args: "after-used",
          argsIgnorePattern: UNUSED_ON_PURPOSE,
          varsIgnorePattern: UNUSED_ON_PURPOSE,
          caughtErrorsIgnorePattern: UNUSED_ON_PURPOSE,
          destructuredArrayIgnorePattern: UNUSED_ON_PURPOSE,
          // `const { omitted, ...rest } = x` is how a copy without some keys is written.
          ignoreRestSiblings: true,
        },
      ],
      "no-unused-private-class-members": "off",
      "@typescript-eslint/no-unused-private-class-members": "error",
      "@typescript-eslint/no-unnecessary-type-assertion": "error",
      // `any` stays allowed where the tree uses it (parsed JSON, test doubles): out of this rule set.
      "@typescript-eslint/no-explicit-any": "off",
    },
  },
  {
    // The request path — the gateway, the services and the platform they share: a function takes at
    // most four positional parameters, more go in an object that names them where they are passed.
    files: ["gateway/src/**/*.ts", "services/*/src/**/*.ts"],
    rules: { "@typescript-eslint/max-params": ["error", { max: 4 }] },
  },
  {
    // The plain JavaScript scripts (they run before anything is compiled) and this file.
    files: ["**/*.mjs", "**/*.js"],
    languageOptions: { globals: globals.node },
  },
  prettier,
);
