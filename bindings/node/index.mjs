// The ESM entry: the same module as index.js (one addon instance per env).
import blitz from './index.js';

export const {
  Pool,
  Event,
  NativeFunction,
  AbortError,
  nativeFunction,
  kernels,
  crc32Sync,
  version,
  libraryVersion,
  addonPath,
  mapOperations,
} = blitz;
export default blitz;
