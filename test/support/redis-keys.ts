// Test data in a shared Redis: a test that writes keys meant to live long (a login's known address
// lives 30 days) deletes its own afterwards.
import { Redis } from "ioredis";

/** Deletes every key under these prefixes (each followed by ":"). */
export async function forgetRedisKeys(redisUrl: string, prefixes: Iterable<string>): Promise<void> {
  const redis = new Redis(redisUrl);
  try {
    for (const prefix of prefixes) {
      for await (const keys of redis.scanStream({ match: `${prefix}:*`, count: 1000 }) as AsyncIterable<string[]>)
        if (keys.length > 0) await redis.del(...keys);
    }
  } finally {
    await redis.quit();
  }
}
