import { storeContract } from './contract/storeContract.js';
import { memoryStore } from './memoryStore.js';

storeContract('memoryStore', async (clock) => ({ store: memoryStore({ clock }) }));
