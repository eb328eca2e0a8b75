import { builder } from './builder.js';
import './enums.js';
import './hair.js';
import './head.js';
import './node.js';
import './head-mutations.js';
import './permission.js';
import './subscription.js';
import './login.js';

export const schema = builder.toSchema({ sortSchema: false });
