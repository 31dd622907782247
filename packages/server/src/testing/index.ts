export { type FetchServer, serveFetch } from './serveFetch.js';
