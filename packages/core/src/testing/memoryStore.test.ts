import { memoryStore } from './memoryStore.js';
import { storeContract } from './storeContract.js';

storeContract('memoryStore', async (clock) => ({ store: memoryStore({ clock }) }));
