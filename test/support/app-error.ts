// The AppError a synchronous call throws, for unit tests that assert its code and details.
import { AppError } from '../../src/errors.js';

export function thrownAppError(run: () => unknown): AppError {
  try {
    run();
  } catch (error) {
    if (error instanceof AppError) return error;
    throw error;
  }
  throw new Error('expected an AppError');
}
